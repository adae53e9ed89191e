-- Group commit: checks that queued while a call to this Redis was in flight, sent as one call
-- and decided each on its own, in order, exactly as one check.lua call each would.
-- ARGV = n, ttl grace ms, lane, then per check: algorithm code, now_ms, limit, window_ms,
-- burst, cost, and on a master lane its key.
-- The lane says where the keys are:
-- - '0', one slot: KEYS = per check its limit's keys (as in batch.lua), all declared.
-- - '1', one cluster master: the checks' keys span the slots of this node, so each comes as its
--   check's last ARGV and only the first check's key is declared (KEYS[1], which routes the
--   call). Every check is a one-key algorithm. A check whose key this node does not serve (its
--   slot moved or is moving) fails at its first read, before it wrote anything, and is
--   answered as not run (allowed = -1): the daemon sends it again alone, following the
--   redirection.
-- Answers one string of four space-separated integers per check, in order: allowed (1/0, or
-- -1 not run), remaining, reset_ms, and the wait: retry_after_ms when denied, delay_ms when
-- allowed (a check has at most one of them). The other fields of check.lua are for batches;
-- every integer left out of the reply is Redis time saved per check.
local n = tonumber(ARGV[1])
TTL_GRACE = tonumber(ARGV[2]) or 0
local master = ARGV[3] == '1'
local width = 6
if master then
  width = 7
  local keys = {}
  for i = 1, n do
    keys[i] = ARGV[3 + i * 7]
  end
  CALL_KEYS = keys
else
  -- One MGET for every key of the group (a GET per check costs Redis more than the check's
  -- own arithmetic); a key seen twice is read again by its later check (see PREFETCHED). A
  -- master lane cannot: its keys span slots, and no single command may.
  local values = redis.call('MGET', unpack(KEYS))
  local seen = {}
  for i = 1, #KEYS do
    local key = KEYS[i]
    if not seen[key] then
      seen[key] = true
      PREFETCHED[i] = values[i]
    end
  end
end
local out = {}
local k, a, o = 1, 4, 0
for _ = 1, n do
  local algorithm = ALGORITHMS[tonumber(ARGV[a])]
  if not algorithm then
    return redis.error_reply('ERR sluice: unknown algorithm code')
  end
  local now, limit, w = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local burst, cost = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local ok, allowed, remaining, reset, retry, delay
  if master then
    if algorithm.keys == 1 then
      ok, allowed, remaining, reset, retry, delay = pcall(algorithm.check, k, now, limit, w,
        burst, cost, algorithm.leaky)
    end
  else
    ok = true
    allowed, remaining, reset, retry, delay = algorithm.check(k, now, limit, w, burst, cost,
      algorithm.leaky)
  end
  a = a + width
  if master then
    k = k + 1
  else
    k = k + algorithm.keys
  end
  o = o + 1
  if ok then
    local wait = retry
    if allowed == 1 then
      wait = delay
    end
    out[o] = format('%d %d %d %d', allowed, remaining, reset, wait)
  else
    out[o] = '-1 0 0 0'
  end
end
-- One string, not 4n integers: the same Redis time, and the daemon parses one bulk string
-- instead of a 4n-element array (its RESP parser's cost per element is most of its share).
return { table.concat(out, ' ') }
