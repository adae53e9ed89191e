-- gcra and leaky_bucket: state 'tat_ms:tat_rem', the theoretical arrival time
-- tat_ms + tat_rem / limit (mirrors sluice-core algorithms/gcra.rs).

local function gcra_expires(tat_ms, tat_rem)
  if tat_rem > 0 then
    return tat_ms + 1
  end
  return tat_ms
end

local function gcra(k, now, limit, w, burst, cost, leaky, mode)
  local need, take, add, sub = plan(mode, cost)
  local cap = burst * w
  local key, raw, s = read_state(k, 2)
  local tat_ms, tat_rem
  if s then
    tat_ms, tat_rem = s[1], s[2]
  else
    tat_ms, tat_rem = now, 0
  end
  -- A lowered limit leaves a remainder past the new unit: keep it in range.
  tat_rem = min(tat_rem, limit - 1)
  -- The queue ahead of now, in units of 1/limit ms.
  local held = 0
  if tat_ms >= now then
    held = (tat_ms - now) * limit + tat_rem
  end
  local peek_remaining = floor(max(cap - held, 0) / w)
  local peek_reset = now + ceil(held / limit)
  local changed = false
  -- A charge pushes the arrival time past the burst: the debt is carried forward.
  local adjusted = adjust(held, add, sub, w, MAX_BALANCE)
  if add > 0 or sub > 0 then
    local q = floor(adjusted / limit)
    tat_ms = now + q
    tat_rem = adjusted - q * limit
    changed = true
  end
  -- need <= cap (checked before sending): no intermediate exceeds the balance.
  local room = cap - need * w
  local allowed = adjusted <= room
  local after = adjusted
  if allowed then
    after = adjusted + take * w
  end
  if allowed and take > 0 then
    local q = floor(after / limit)
    tat_ms = now + q
    tat_rem = after - q * limit
    changed = true
  end
  local retry = 0
  if not allowed then
    retry = ceil((adjusted - room) / limit)
  end
  local delay = 0
  if allowed and leaky then
    delay = ceil(adjusted / limit)
  end
  store(key, raw, s ~= nil or changed, gcra_expires(tat_ms, tat_rem), nil, now,
    tat_ms, tat_rem)
  return allowed and 1 or 0, signed_remaining(cap, after, w),
    now + ceil(after / limit), retry, delay, peek_remaining, peek_reset, 0
end

local function gcra_refund(k, now, limit, w, burst, cost, token)
  local key, raw, s = read_state(k, 2)
  if not s then
    return
  end
  local tat_ms, tat_rem = s[1], min(s[2], limit - 1)
  local total = tat_rem - cost * w
  if total >= 0 then
    tat_rem = total
  else
    local borrow = ceil(-total / limit)
    tat_ms = tat_ms - borrow
    tat_rem = total + borrow * limit
  end
  store(key, raw, true, gcra_expires(tat_ms, tat_rem), nil, now, tat_ms, tat_rem)
end

