-- sliding_window_log: KEYS[k] is a sorted set of admitted requests, one member per distinct
-- millisecond, score = at_ms, member = 'at_ms:cost'; KEYS[k + 1] holds their summed cost.
-- Mirrors sluice-core algorithms/sliding_window_log.rs.

local function swl_cost(member)
  return tonumber(string.match(member, ':(%d+)$')) or 0
end

local function swl_newest(zkey)
  local r = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
  if r[1] then
    return r[1], tonumber(r[2])
  end
  return nil, nil
end

-- The summed cost of the log; recomputed if the sum key was lost.
local function swl_used(zkey, skey)
  local used = tonumber(redis.call('GET', skey) or '')
  if used then
    return used
  end
  used = 0
  for _, m in ipairs(redis.call('ZRANGE', zkey, 0, -1)) do
    used = used + swl_cost(m)
  end
  return used
end

-- Writes the sum and the TTL of both keys (time until the newest entry leaves the window).
local function swl_persist(zkey, skey, newest_at, used, w, now)
  if newest_at == nil then
    redis.call('DEL', zkey, skey)
    return
  end
  local ttl = max(newest_at + w - now, 0) + TTL_GRACE
  if ttl <= 0 then
    redis.call('DEL', zkey, skey)
    return
  end
  ttl = int(ttl)
  redis.call('SET', skey, int(used), 'PX', ttl)
  redis.call('PEXPIRE', zkey, ttl)
end

local function sliding_window_log(k, now0, limit, w, burst, cost0, leaky, mode)
  -- A log carries no debt (a charge is refused before sending): only need and take apply.
  local need, cost = plan(mode, cost0)
  local zkey, skey = KEYS[k], KEYS[k + 1]
  local newest_m, newest_at = swl_newest(zkey)
  local used = 0
  if newest_m then
    used = swl_used(zkey, skey)
  end
  local changed = false
  -- A clock behind the newest entry is read as that entry's time.
  local now = max(now0, newest_at or 0)
  if newest_m then
    local cut = int(now - w)
    local gone = redis.call('ZRANGEBYSCORE', zkey, '-inf', cut)
    if #gone > 0 then
      for _, m in ipairs(gone) do
        used = used - swl_cost(m)
      end
      used = max(used, 0)
      redis.call('ZREMRANGEBYSCORE', zkey, '-inf', cut)
      changed = true
      if newest_at + w <= now then
        newest_m, newest_at = nil, nil
      end
    end
  end
  local peek_remaining = max(limit - used, 0)
  local peek_reset = now
  if newest_at then
    peek_reset = newest_at + w
  end
  local allowed = used + need <= limit
  if allowed and cost > 0 then
    used = used + cost
    local entry = cost
    if newest_m and newest_at == now then
      redis.call('ZREM', zkey, newest_m)
      entry = swl_cost(newest_m) + cost
    end
    newest_m, newest_at = int(now) .. ':' .. int(entry), now
    redis.call('ZADD', zkey, int(now), newest_m)
    changed = true
  end
  local retry = 0
  if not allowed then
    -- Wait for the oldest entries to leave the window until this cost fits.
    local needed = used + need - limit
    local freed, at, from = 0, now, 0
    local done = false
    while not done do
      local chunk = redis.call('ZRANGE', zkey, from, from + 63, 'WITHSCORES')
      if #chunk == 0 then
        break
      end
      for i = 1, #chunk, 2 do
        freed = freed + swl_cost(chunk[i])
        at = tonumber(chunk[i + 1]) + w
        if freed >= needed then
          done = true
          break
        end
      end
      from = from + 64
    end
    retry = max(at - now, 0)
  end
  if changed then
    swl_persist(zkey, skey, newest_at, used, w, now0)
  end
  local reset = now
  if newest_at then
    reset = newest_at + w
  end
  return allowed and 1 or 0, max(limit - used, 0), reset, retry, 0,
    peek_remaining, peek_reset, now
end

local function sliding_window_log_refund(k, now, limit, w, burst, cost, token)
  local zkey, skey = KEYS[k], KEYS[k + 1]
  local at = int(token)
  local members = redis.call('ZRANGEBYSCORE', zkey, at, at)
  if #members == 0 then
    return
  end
  local member = members[1]
  local had = swl_cost(member)
  local used = swl_used(zkey, skey)
  redis.call('ZREM', zkey, member)
  if had > cost then
    redis.call('ZADD', zkey, at, at .. ':' .. int(had - cost))
  end
  used = max(used - min(had, cost), 0)
  local _, newest_at = swl_newest(zkey)
  swl_persist(zkey, skey, newest_at, used, w, now)
end

