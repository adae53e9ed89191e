-- Gives back what checks consumed (the other half of a cross-slot batch that was denied).
-- ARGV = now_ms, n, ttl grace ms, then per check: algorithm code, limit, window_ms, burst, cost, token
-- (the eighth field its check answered). KEYS as in batch.lua. Applied in reverse order.
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
TTL_GRACE = tonumber(ARGV[3]) or 0
local items = {}
local k, a = 1, 4
for i = 1, n do
  local algorithm = ALGORITHMS[tonumber(ARGV[a])]
  if not algorithm then
    return redis.error_reply('ERR sluice: unknown algorithm code')
  end
  items[i] = { algorithm.refund, k, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]) }
  a = a + 6
  k = k + algorithm.keys
end
for i = n, 1, -1 do
  local it = items[i]
  it[1](it[2], now, it[3], it[4], it[5], it[6], it[7])
end
-- A table, as every script answers (the runner reads each answer as a list).
return { n }
