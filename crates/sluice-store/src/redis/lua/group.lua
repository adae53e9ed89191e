-- Group commit: checks that queued while a call to this Redis was in flight, sent as one call
-- and decided each on its own, in order, exactly as one check.lua call each would.
-- ARGV = n, ttl grace ms, lane, the parameters, then on a master lane the n checks' keys.
-- The parameters are one string of 7 little-endian doubles per check: algorithm code, now_ms,
-- limit, window_ms, burst, cost, mode (common.lua plan) (binary, so Redis parses no digits:
-- a `tonumber` is a strtod,
-- and seven arguments per check cost Redis more than the check's own arithmetic).
-- The lane says where the keys are:
-- - '0', one slot: KEYS = per check its limit's keys (as in batch.lua), all declared.
-- - '1', one cluster master: the checks' keys span the slots of this node, so each comes in
--   ARGV after the parameters and only the first check's key is declared (KEYS[1], which
--   routes the call). Every check is a one-key algorithm. A check whose key this node does not
--   serve (its slot moved or is moving) fails at its first read, before it wrote anything, and
--   is answered as not run (allowed = -1): the daemon sends it again alone, following the
--   redirection.
-- Answers one string of 4 little-endian doubles per check, in order: allowed (1/0, or -1 not
-- run), remaining, reset_ms, and the wait: retry_after_ms when denied, delay_ms when allowed
-- (a check has at most one of them). The other fields of check.lua are for batches.
local n = tonumber(ARGV[1])
TTL_GRACE = tonumber(ARGV[2]) or 0
local master = ARGV[3] == '1'
local params = ARGV[4]
local unpack_params, pack_answer = struct.unpack, struct.pack
if master then
  local keys = {}
  for i = 1, n do
    keys[i] = ARGV[4 + i]
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
local k, pos = 1, 1
for o = 1, n do
  local code, now, limit, w, burst, cost, mode
  code, now, limit, w, burst, cost, mode, pos = unpack_params('<ddddddd', params, pos)
  local algorithm = ALGORITHMS[code]
  if not algorithm then
    return redis.error_reply('ERR sluice: unknown algorithm code')
  end
  local ok, allowed, remaining, reset, retry, delay
  if master then
    if algorithm.keys == 1 then
      ok, allowed, remaining, reset, retry, delay = pcall(algorithm.check, k, now, limit, w,
        burst, cost, algorithm.leaky, mode)
    end
    k = k + 1
  else
    ok = true
    allowed, remaining, reset, retry, delay = algorithm.check(k, now, limit, w, burst, cost,
      algorithm.leaky, mode)
    k = k + algorithm.keys
  end
  if ok then
    local wait = retry
    if allowed == 1 then
      wait = delay
    end
    out[o] = pack_answer('<dddd', allowed, remaining, reset, wait)
  else
    out[o] = pack_answer('<dddd', -1, 0, 0, 0)
  end
end
return table.concat(out)
