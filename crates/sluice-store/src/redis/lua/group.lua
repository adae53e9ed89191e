-- Group commit: checks that queued while a call to this Redis was in flight, sent as one call
-- and decided each on its own, in order, exactly as one check.lua call each would.
-- ARGV = n, ttl grace ms, then per check: algorithm code, now_ms, limit, window_ms, burst, cost.
-- KEYS = per check its limit's keys (as in batch.lua).
-- Answers the eight fields of check.lua per check, in order.
local n = tonumber(ARGV[1])
TTL_GRACE = tonumber(ARGV[2]) or 0
local out = {}
local k, a = 1, 3
for _ = 1, n do
  local algorithm = ALGORITHMS[tonumber(ARGV[a])]
  if not algorithm then
    return redis.error_reply('ERR sluice: unknown algorithm code')
  end
  local r = algorithm.check(k, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), algorithm.leaky)
  a = a + 6
  k = k + algorithm.keys
  for j = 1, 8 do
    out[#out + 1] = r[j]
  end
end
return out
