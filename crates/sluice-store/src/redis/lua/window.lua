-- The sliding window weighting, shared by sliding_window_counter.lua and replicated.lua so
-- both decide with one copy of it (mirrors sluice-core algorithms/sliding_window_counter.rs):
-- the previous window counts with the weight of the part of it still inside the sliding
-- window, floor(previous * (w - elapsed) / w).

-- The first `elapsed` in 0..=w at which the previous window's weight is <= room.
local function swc_decay(previous, room, w)
  if previous <= room then
    return 0
  end
  local span = (room + 1) * w - 1
  return w - floor(span / previous)
end

local function swc_reset(start, w, current, previous, now)
  if current > 0 then
    return start + w + swc_decay(current, 0, w)
  elseif previous > 0 then
    return max(start + swc_decay(previous, 0, w), now)
  end
  return now
end

-- What the sliding window holds `elapsed` ms into the current window.
local function swc_used(current, previous, elapsed, w)
  return floor(previous * (w - elapsed) / w) + current
end

-- How long until `cost` fits, for a check denied `now` in the window starting at `start`.
local function swc_retry(start, w, current, previous, limit, cost, now)
  if current + cost <= limit then
    return max(start + swc_decay(previous, limit - current - cost, w) - now, 0)
  end
  return max(start + w + swc_decay(current, limit - cost, w) - now, 0)
end
