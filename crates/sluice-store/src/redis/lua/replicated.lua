-- Replicated window counters (scope = "replicated"): checks decided on this region's Redis
-- from per-region counters, all-or-nothing like batch.lua.
--
-- One hash per (limit, window index): field 'r:<region>' is that region's consumption in the
-- window (this region's own field grows by HINCRBY here; peers' fields are written by
-- merge.lua with max(), so they only ever grow to the latest total a peer shipped), field
-- 'a:<peer>' is the highest own total that peer has acknowledged (also merged with max()).
-- A region's view of a window is the sum of the 'r:' fields. Its unacknowledged consumption
-- (own total minus the lowest acknowledgement, current and previous window) may not exceed
-- `cap` (a single check above the cap passes only with nothing unacknowledged): this is what
-- bounds the overshoot whatever the load and the link latency. The cap only gates admission:
-- `remaining` is what every region left of the limit (limit minus the sum), so a client
-- pacing itself by it is paced by the limit, and a check only the cap denies is told to retry
-- after the retry hint (about one sync interval, when acknowledgements free the cap) instead of
-- at the window's end.
--
-- KEYS = per check: the hash of its current window, the hash of the previous window.
-- ARGV = now_ms, n, ttl grace ms, own field ('r:<region>'), number of peers p, the p ack
-- fields ('a:<peer>'), then per check: mode (0 fixed_window, 1 sliding_window_counter),
-- limit, window_ms, cost, cap, retry hint ms (when only the cap denies).
-- Answers { 1 if committed else 0, then per check the eight fields of check.lua followed by
-- the own total of its current window after the call }.
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
TTL_GRACE = tonumber(ARGV[3]) or 0
local me = ARGV[4]
local np = tonumber(ARGV[5])
local acks = {}
for i = 1, np do
  acks[i] = ARGV[5 + i]
end
local a = 6 + np

-- Per key: { sum = all 'r:' fields, own, ack = lowest acknowledgement, add = pending in this
-- call, expires = when the window stops mattering }.
local states = {}
local order = {}
local function state(key)
  local s = states[key]
  if s then
    return s
  end
  local flat = redis.call('HGETALL', key)
  local fields = {}
  local sum = 0
  for i = 1, #flat, 2 do
    local v = tonumber(flat[i + 1]) or 0
    fields[flat[i]] = v
    if string.sub(flat[i], 1, 2) == 'r:' then
      sum = sum + v
    end
  end
  local own = fields[me] or 0
  local ack = own
  for _, f in ipairs(acks) do
    ack = math.min(ack, fields[f] or 0)
  end
  s = { sum = sum, own = own, ack = ack, add = 0, expires = 0 }
  states[key] = s
  order[#order + 1] = key
  return s
end

local out = { 1 }
local checks = {}
local k = 1
for i = 1, n do
  local mode, limit, w, cost, cap, hint =
    tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]),
    tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  a = a + 6
  local cur = state(KEYS[k])
  local prev = state(KEYS[k + 1])
  k = k + 2
  local index = math.floor(now / w)
  local start = index * w
  local window_end = start + w
  local current = cur.sum + cur.add
  local previous = 0
  if mode == 1 then
    previous = prev.sum
  end
  -- Kept one window past its end, whatever the algorithm: a sliding window counter reads it
  -- then, and for both a delivery late by up to a window still lands (and the regions'
  -- counters of the last window can be compared).
  cur.expires = window_end + w
  local unacked = cur.own + cur.add - cur.ack
  if mode == 1 then
    unacked = unacked + math.max(prev.own - prev.ack, 0)
  end
  local used = swc_used(current, previous, now - start, w)
  local function left(u)
    return math.max(limit - u, 0)
  end
  local function reset_of(c)
    if mode == 1 then
      return swc_reset(start, w, c, previous, now)
    elseif c == 0 then
      return now
    end
    return window_end
  end
  local peek_remaining = left(used)
  local peek_reset = reset_of(current)
  local fits = used + cost <= limit
  -- A check costing more than the cap passes when nothing is unacknowledged, or it never would.
  local allowed = fits and (unacked + cost <= cap or unacked == 0)
  local retry = 0
  if allowed then
    cur.add = cur.add + cost
    current = current + cost
    used = used + cost
  elseif not fits then
    if mode == 1 then
      retry = swc_retry(start, w, current, previous, limit, cost, now)
    else
      retry = math.max(window_end - now, 0)
    end
  else
    retry = hint
  end
  if not allowed then
    out[1] = 0
  end
  checks[i] = { allowed and 1 or 0, left(used), reset_of(current), retry, 0,
    peek_remaining, peek_reset, index, KEYS[k - 2] }
end

local committed = out[1] == 1
if committed then
  for _, key in ipairs(order) do
    local s = states[key]
    if s.add > 0 then
      s.own = redis.call('HINCRBY', key, me, int(s.add))
      redis.call('PEXPIRE', key, int(math.max(s.expires - now, 1) + TTL_GRACE))
    end
  end
end
for i = 1, n do
  local c = checks[i]
  for j = 1, 8 do
    out[#out + 1] = c[j]
  end
  if committed then
    out[#out + 1] = states[c[9]].own
  else
    out[#out + 1] = 0
  end
end
return out
