-- sluice: helpers shared by every script. Numbers are doubles holding exact integers below
-- 2^53; integer division is math.floor(a / b) (math.ceil for a rounded-up quotient), which
-- is exact on such operands. Integers are written with '%d' so no digit is ever lost.

-- Milliseconds every TTL is extended by (the store's `ttl_grace`, 0 by default); set by the
-- script's main part from ARGV before any state is written.
local TTL_GRACE = 0

-- The library functions every check calls, as locals: a global and a field lookup fewer per
-- call, on the path that runs once per check.
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local format, match = string.format, string.match

local function int(x)
  return format('%d', x)
end

-- The numbers of a state string 'a:b' or 'a:b:c' (n = 2 or 3), or nil when absent or not
-- `n` numbers. One anchored match, not a loop: this runs once per check and is most of a
-- script's own work after the GET and SET.
local STATE_PATTERNS = { [2] = '^(%d+):(%d+)$', [3] = '^(%d+):(%d+):(%d+)$' }
local function parse(raw, n)
  if not raw then
    return nil
  end
  local a, b, c = match(raw, STATE_PATTERNS[n])
  if not a then
    return nil
  end
  if n == 2 then
    return { tonumber(a), tonumber(b) }
  end
  return { tonumber(a), tonumber(b), tonumber(c) }
end

-- The key of state `k` of this call, its raw value, and its `n` numbers (nil when absent).
-- PREFETCHED[k]: the value KEYS[k] held when a group call began (false when absent), read by
-- one MGET for the whole group instead of a GET per check; nil for keys not read that way.
-- Only a key's first use in a call is prefetched: a later check of the same key must see
-- what the earlier one wrote.
-- CALL_KEYS[k]: the key of state `k`: KEYS, except in a group call to a cluster master, whose
-- checks' keys span slots and come in ARGV (see group.lua).
local PREFETCHED = {}
local CALL_KEYS = KEYS
local function read_state(k, n)
  local key = CALL_KEYS[k]
  local raw = PREFETCHED[k]
  if raw == nil then
    raw = redis.call('GET', key)
  end
  if not raw then
    raw = nil
  end
  return key, raw, parse(raw, n)
end

-- Persists a state string of the numbers a, b (and c, for three-number states). `keep`:
-- whether the state is worth keeping (it existed, or this check consumed). The TTL is the time
-- until the state is fresh again (`expires - now`), plus TTL_GRACE; a state already back to
-- fresh is deleted (kept TTL_GRACE when there is one). An unchanged state is not rewritten (its
-- expiry, and so its TTL, is unchanged). `before`: the expiry of the state as it was read (nil
-- when there was none); when the new state expires at the same moment, the key's TTL, set when
-- that expiry was first written, is kept (KEEPTTL): a window's counter changes expiry once per
-- window, and a SET without PX costs Redis about a third less. The numbers come as
-- arguments, not a table: this runs once per check, and a table is an allocation. The TTL goes
-- as a string formatted here: cheaper than Redis turning a Lua number into digits ('%.17g').
local function store(key, raw, keep, expires, before, now, a, b, c)
  if not keep then
    return
  end
  local ttl = max(expires - now, 0) + TTL_GRACE
  if ttl <= 0 then
    if raw then
      redis.call('DEL', key)
    end
    return
  end
  local value
  if c == nil then
    value = format('%d:%d', a, b)
  else
    value = format('%d:%d:%d', a, b, c)
  end
  if value == raw then
    return
  end
  if raw and before == expires then
    redis.call('SET', key, value, 'KEEPTTL')
  else
    redis.call('SET', key, value, 'PX', int(ttl))
  end
end

-- The largest balance a state holds, in its own units (sluice-core mode.rs MAX_BALANCE,
-- 2^52): a charge beyond it saturates, so a balance plus a cost stays exact.
local MAX_BALANCE = 4503599627370496

-- What a check of `cost` does in mode `mode` (sluice-core mode.rs): 0 consume, 1 ask,
-- 2 charge, 3 refund. Returns need (must fit), take (consumed when it does), add and sub
-- (applied first, whatever the room).
local function plan(mode, cost)
  if mode == 1 then
    return max(cost, 1), cost, 0, 0
  elseif mode == 2 then
    return 1, 0, cost, 0
  elseif mode == 3 then
    return 1, 0, 0, cost
  end
  return cost, cost, 0, 0
end

-- `used` after a plan's unconditional part, one unit of cost being `unit` units of state,
-- saturating at `ceiling` (never lowering a balance already above it), never below 0.
local function adjust(used, add, sub, unit, ceiling)
  return max(min(used + add * unit, max(ceiling, used)) - sub * unit, 0)
end

-- The signed remaining the scripts answer: remaining when >= 0, minus the debt when in
-- debt (answers.rs splits it): floor of a negative is minus the debt rounded up.
local function signed_remaining(cap, after, unit)
  return floor((cap - after) / unit)
end
