-- sliding_window_counter: state 'window:current:previous' (mirrors
-- sluice-core algorithms/sliding_window_counter.rs), weighted as window.lua says.

local function swc_expires(window, current, previous, w)
  if current > 0 then
    return (window + 2) * w
  elseif previous > 0 then
    return (window + 1) * w
  end
  return 0
end

local function sliding_window_counter(k, now0, limit, w, burst, cost, leaky, mode)
  local need, take, add, sub = plan(mode, cost)
  local key, raw, s = read_state(k, 3)
  local window, current, previous
  if s then
    window, current, previous = s[1], s[2], s[3]
  else
    window, current, previous = floor(now0 / w), 0, 0
  end
  -- A clock behind the stored window is read as the stored window's start.
  local now = max(now0, window * w)
  local index = floor(now / w)
  if index == window + 1 then
    previous = current
    current = 0
  elseif index > window then
    previous = 0
    current = 0
  end
  window = index
  local start = index * w
  local elapsed = now - start
  local peek_remaining = max(limit - swc_used(current, previous, elapsed, w), 0)
  local peek_reset = swc_reset(start, w, current, previous, now)
  -- A charge counts in the window it was charged in; the ceiling keeps previous * w exact.
  local counted = current
  current = adjust(current, add, sub, 1, floor(MAX_BALANCE / w))
  local used = swc_used(current, previous, elapsed, w)
  local allowed = used <= limit - need
  if allowed then
    current = current + take
    used = used + take
  end
  local retry = 0
  if not allowed then
    retry = swc_retry(start, w, current, previous, limit, need, now)
  end
  store(key, raw, s ~= nil or current ~= counted, swc_expires(window, current, previous, w),
    s and swc_expires(s[1], s[2], s[3], w), now0, window, current, previous)
  return allowed and 1 or 0, limit - used,
    swc_reset(start, w, current, previous, now), retry, 0, peek_remaining, peek_reset, index
end

local function sliding_window_counter_refund(k, now, limit, w, burst, cost, token)
  local key, raw, s = read_state(k, 3)
  if not s then
    return
  end
  local before = swc_expires(s[1], s[2], s[3], w)
  if s[1] == token then
    s[2] = max(s[2] - cost, 0)
  elseif s[1] == token + 1 then
    s[3] = max(s[3] - cost, 0)
  end
  store(key, raw, true, swc_expires(s[1], s[2], s[3], w), before, now, s[1], s[2], s[3])
end

