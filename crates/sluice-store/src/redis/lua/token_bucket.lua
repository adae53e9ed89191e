-- token_bucket: state 'used:last_ms', what has been taken out of the bucket in 1/window_ms
-- token (mirrors sluice-core algorithms/token_bucket.rs: keeping consumption, not the level,
-- means a raised limit or burst gives its room at once).

local function tb_full_at(limit, used, last)
  return last + ceil(used / limit)
end

local function token_bucket(k, now0, limit, w, burst, cost)
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
  local need = cost * w
  local allowed = used + need <= cap
  if allowed then
    used = used + need
  end
  local retry = 0
  if not allowed then
    retry = ceil((used + need - cap) / limit)
  end
  local full = tb_full_at(limit, used, now)
  store(key, raw, s ~= nil or (allowed and cost > 0), full, nil, now0, used, last)
  return allowed and 1 or 0, floor(max(cap - used, 0) / w), full, retry, 0,
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
