-- token_bucket: state 'used:last_ms', what has been taken out of the bucket in 1/window_ms
-- token (mirrors sluice-core algorithms/token_bucket.rs: keeping consumption, not the level,
-- means a raised limit or burst gives its room at once).

local function tb_full_at(limit, used, last)
  return last + ceil(used / limit)
end

local function token_bucket(k, now0, limit, w, burst, cost, leaky, mode)
  local need, take, add, sub = plan(mode, cost)
  local cap = burst * w
  local key, raw, s = read_state(k, 2)
  local used, last
  if s then
    used, last = s[1], s[2]
  else
    used, last = 0, now0
  end
  -- A clock behind the last check refills nothing.
  local now = max(now0, last)
  used = max(used - (now - last) * limit, 0)
  last = now
  local peek_remaining = floor(max(cap - used, 0) / w)
  local peek_reset = tb_full_at(limit, used, now)
  -- A charge may take out more than the bucket holds: the debt is carried forward and the
  -- refill repays it before the key is allowed again.
  local refilled = used
  used = adjust(used, add, sub, w, MAX_BALANCE)
  -- need <= cap (checked before sending): no intermediate exceeds the balance.
  local room = cap - need * w
  local allowed = used <= room
  if allowed then
    used = used + take * w
  end
  local retry = 0
  if not allowed then
    retry = ceil((used - room) / limit)
  end
  local full = tb_full_at(limit, used, now)
  store(key, raw, s ~= nil or used ~= refilled, full, nil, now0, used, last)
  return allowed and 1 or 0, signed_remaining(cap, used, w), full, retry, 0,
    peek_remaining, peek_reset, 0
end

local function token_bucket_refund(k, now, limit, w, burst, cost, token)
  local key, raw, s = read_state(k, 2)
  if not s then
    return
  end
  s[1] = max(s[1] - cost * w, 0)
  store(key, raw, true, tb_full_at(limit, s[1], s[2]), nil, now, s[1], s[2])
end
