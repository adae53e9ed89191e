-- All-or-nothing checks whose keys share one slot, then the candidate limits judged beside
-- some of them.
-- ARGV = now_ms, n, ttl grace ms, then per check: algorithm code, limit, window_ms, burst, cost,
-- mode (common.lua plan); then m (absent: 0) and per candidate the same six values.
-- KEYS = per check its limit's keys (two for sliding_window_log, code 2; one otherwise), then
-- per candidate its keys.
-- Every check is decided in order (a key checked twice sees its earlier consumption); if any
-- is denied (a check counting every hit, code 6, cancels nothing), every key is put back as
-- it was. Then every candidate is decided on its own, in
-- order, consuming when it alone allows, whatever the batch's answer (its keys are never a
-- check's: they are put back by nothing). Answers { 1 if committed else 0, then per check the
-- eight fields of check.lua, then per candidate the same }.
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
TTL_GRACE = tonumber(ARGV[3]) or 0
local out = { 1 }
local saved, saved_keys, logs = {}, {}, {}
local k, a = 1, 4
for _ = 1, n do
  local code = tonumber(ARGV[a])
  local limit, w, burst, cost, mode = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  a = a + 6
  local algorithm = ALGORITHMS[code]
  if not algorithm then
    return redis.error_reply('ERR sluice: unknown algorithm code')
  end
  if algorithm.keys == 1 then
    local key = KEYS[k]
    if saved[key] == nil then
      saved[key] = { redis.call('GET', key), redis.call('PTTL', key) }
      saved_keys[#saved_keys + 1] = key
    end
  end
  local r = { algorithm.check(k, now, limit, w, burst, cost, algorithm.leaky, mode) }
  -- A denial cancels the batch, unless every hit counts or it answers a charge or refund
  -- (mode 2, 3), which always applies.
  if r[1] ~= 1 and not algorithm.every_hit and mode < 2 then
    out[1] = 0
  elseif code == 2 and cost > 0 and mode < 2 then
    logs[#logs + 1] = { k, limit, w, burst, cost, r[8] }
  end
  k = k + algorithm.keys
  for j = 1, 8 do
    out[#out + 1] = r[j]
  end
end
if out[1] == 0 then
  for i = #logs, 1, -1 do
    local l = logs[i]
    sliding_window_log_refund(l[1], now, l[2], l[3], l[4], l[5], l[6])
  end
  for _, key in ipairs(saved_keys) do
    local v = saved[key]
    if not v[1] then
      redis.call('DEL', key)
    elseif v[2] > 0 then
      redis.call('SET', key, v[1], 'PX', v[2])
    else
      redis.call('SET', key, v[1])
    end
  end
end
local m = tonumber(ARGV[a]) or 0
a = a + 1
for _ = 1, m do
  local algorithm = ALGORITHMS[tonumber(ARGV[a])]
  if not algorithm then
    return redis.error_reply('ERR sluice: unknown algorithm code')
  end
  local r = { algorithm.check(k, now, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), algorithm.leaky, tonumber(ARGV[a + 5])) }
  a = a + 6
  k = k + algorithm.keys
  for j = 1, 8 do
    out[#out + 1] = r[j]
  end
end
return out
