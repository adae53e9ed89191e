-- Group commit: checks that queued while a call to this Redis was in flight, sent as one call
-- and decided each on its own, in order, exactly as one check.lua call each would.
-- ARGV = n, ttl grace ms, then per check: algorithm code, now_ms, limit, window_ms, burst, cost.
-- KEYS = per check its limit's keys (as in batch.lua).
-- Answers one string of four space-separated integers per check, in order: allowed (1/0),
-- remaining, reset_ms, and the wait: retry_after_ms when denied, delay_ms when allowed (a
-- check has at most one of them). The other fields of check.lua are for batches; every
-- integer left out of the reply is Redis time saved per check.
local n = tonumber(ARGV[1])
TTL_GRACE = tonumber(ARGV[2]) or 0
-- One MGET for every key of the group (a GET per check costs Redis more than the check's own
-- arithmetic); a key seen twice is read again by its later check (see PREFETCHED).
local values = redis.call('MGET', unpack(KEYS))
local seen = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  if not seen[key] then
    seen[key] = true
    PREFETCHED[i] = values[i]
  end
end
local out = {}
local k, a, o = 1, 3, 0
for _ = 1, n do
  local algorithm = ALGORITHMS[tonumber(ARGV[a])]
  if not algorithm then
    return redis.error_reply('ERR sluice: unknown algorithm code')
  end
  local allowed, remaining, reset, retry, delay = algorithm.check(k, tonumber(ARGV[a + 1]),
    tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]),
    tonumber(ARGV[a + 5]), algorithm.leaky)
  a = a + 6
  k = k + algorithm.keys
  local wait = retry
  if allowed == 1 then
    wait = delay
  end
  o = o + 1
  out[o] = format('%d %d %d %d', allowed, remaining, reset, wait)
end
-- One string, not 4n integers: the same Redis time, and the daemon parses one bulk string
-- instead of a 4n-element array (its RESP parser's cost per element is most of its share).
return { table.concat(out, ' ') }
