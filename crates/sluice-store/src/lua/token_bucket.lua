-- token_bucket: state 'level:last_ms', level in 1/window_ms token (mirrors
-- sluice-core algorithms/token_bucket.rs).

local function tb_full_at(cap, limit, level, last)
  return last + math.ceil(math.max(cap - level, 0) / limit)
end

local function token_bucket(k, now0, limit, w, burst, cost)
  local key = KEYS[k]
  local cap = burst * w
  local raw = redis.call('GET', key)
  local s = parse(raw, 2)
  local level, last
  if s then
    level, last = s[1], s[2]
  else
    level, last = cap, now0
  end
  -- A clock behind the last check refills nothing.
  local now = math.max(now0, last)
  level = math.min(level + (now - last) * limit, cap)
  last = now
  local peek_remaining = math.floor(level / w)
  local peek_reset = tb_full_at(cap, limit, level, now)
  local need = cost * w
  local allowed = level >= need
  if allowed then
    level = level - need
  end
  local retry = 0
  if not allowed then
    retry = math.ceil((need - level) / limit)
  end
  local full = tb_full_at(cap, limit, level, now)
  store(key, raw, s ~= nil or (allowed and cost > 0), { level, last }, full, now0)
  return { allowed and 1 or 0, math.floor(level / w), full, retry, 0,
    peek_remaining, peek_reset, 0 }
end

local function token_bucket_refund(k, now, limit, w, burst, cost, token)
  local key = KEYS[k]
  local cap = burst * w
  local raw = redis.call('GET', key)
  local s = parse(raw, 2)
  if not s then
    return
  end
  s[1] = math.min(s[1] + cost * w, cap)
  store(key, raw, true, s, tb_full_at(cap, limit, s[1], s[2]), now)
end

