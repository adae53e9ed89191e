-- gcra and leaky_bucket: state 'tat_ms:tat_rem', the theoretical arrival time
-- tat_ms + tat_rem / limit (mirrors sluice-core algorithms/gcra.rs).

local function gcra_expires(tat_ms, tat_rem)
  if tat_rem > 0 then
    return tat_ms + 1
  end
  return tat_ms
end

local function gcra(k, now, limit, w, burst, cost, leaky)
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
  local debt = 0
  if tat_ms >= now then
    debt = (tat_ms - now) * limit + tat_rem
  end
  local peek_remaining = floor(max(cap - debt, 0) / w)
  local peek_reset = now + ceil(debt / limit)
  local new_debt = debt + cost * w
  local allowed = new_debt <= cap
  if allowed and cost > 0 then
    local q = floor(new_debt / limit)
    tat_ms = now + q
    tat_rem = new_debt - q * limit
  end
  local after = debt
  if allowed then
    after = new_debt
  end
  local retry = 0
  if not allowed then
    retry = ceil((new_debt - cap) / limit)
  end
  local delay = 0
  if allowed and leaky then
    delay = ceil(debt / limit)
  end
  store(key, raw, s ~= nil or (allowed and cost > 0), gcra_expires(tat_ms, tat_rem), nil, now,
    tat_ms, tat_rem)
  return allowed and 1 or 0, floor(max(cap - after, 0) / w),
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

