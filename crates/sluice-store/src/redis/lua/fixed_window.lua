-- fixed_window: state 'window:count' (mirrors sluice-core algorithms/fixed_window.rs).
-- `every_hit`: envoyproxy/ratelimit's counting: every hit is counted, denied ones too (the
-- count capped at 2^53, where Lua numbers stop being exact), and a check is denied when the
-- count after it exceeds the limit; a cost of 0 asks whether anything is left.

local function fixed_window_expires(window, count, w)
  if count == 0 then
    return 0
  end
  return (window + 1) * w
end

local function fixed_window(k, now, limit, w, burst, cost, every_hit, mode)
  local need, take, add, sub = plan(mode, cost)
  local key, raw, s = read_state(k, 2)
  local window, count
  if s then
    window, count = s[1], s[2]
  else
    window, count = floor(now / w), 0
  end
  -- A clock behind the stored window keeps counting in the stored window.
  local index = max(floor(now / w), window)
  if index ~= window then
    window = index
    count = 0
  end
  local window_end = (index + 1) * w
  local peek_remaining = max(limit - count, 0)
  local peek_reset = window_end
  if count == 0 then
    peek_reset = now
  end
  local counted = count
  local allowed
  if not every_hit then
    -- A charge counts in the window it was charged in, beyond the limit if need be.
    count = adjust(count, add, sub, 1, MAX_BALANCE)
    allowed = count <= limit - need
    if allowed then
      count = count + take
    end
  elseif take > 0 then
    count = min(count + take, 2 ^ 53)
    allowed = count <= limit
  else
    allowed = count < limit
  end
  local reset = window_end
  if count == 0 then
    reset = now
  end
  local retry = 0
  if not allowed then
    retry = max(window_end - now, 0)
  end
  store(key, raw, s ~= nil or count ~= counted, fixed_window_expires(window, count, w),
    s and fixed_window_expires(s[1], s[2], w), now, window, count)
  -- Hits past the limit are counted, not owed: no debt when every hit counts.
  local remaining = limit - count
  if every_hit then
    remaining = max(remaining, 0)
  end
  return allowed and 1 or 0, remaining, reset, retry, 0,
    peek_remaining, peek_reset, index
end

local function fixed_window_refund(k, now, limit, w, burst, cost, token)
  local key, raw, s = read_state(k, 2)
  if not s then
    return
  end
  local before = fixed_window_expires(s[1], s[2], w)
  if s[1] == token then
    s[2] = max(s[2] - cost, 0)
  end
  store(key, raw, true, fixed_window_expires(s[1], s[2], w), before, now, s[1], s[2])
end


-- fixed_window over calendar windows (code 7): the daemon sends the window holding `now` as
-- window `index` of a uniform frame (sluice-core calendar.rs): its length as `w` and, in
-- burst's place, the `origin` subtracted from real times to land in that frame. The
-- arithmetic is fixed_window's; the resets it answers are mapped back to real times.
local function calendar_window(k, now, limit, w, origin, cost, every_hit, mode)
  local allowed, remaining, reset, retry, delay, peek_remaining, peek_reset, index =
    fixed_window(k, now - origin, limit, w, 0, cost, false, mode)
  return allowed, remaining, reset + origin, retry, delay, peek_remaining,
    peek_reset + origin, index
end

local function calendar_window_refund(k, now, limit, w, origin, cost, token)
  fixed_window_refund(k, now - origin, limit, w, 0, cost, token)
end
