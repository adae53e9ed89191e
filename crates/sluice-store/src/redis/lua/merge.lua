-- Merges absolute per-region totals into window hashes (replicated scope): each field becomes
-- max(stored, shipped). Idempotent and order-free, so a late, duplicated or reordered delivery
-- can neither lose nor double count consumption. Used for a peer's 'r:<region>' totals and for
-- this region's own 'a:<peer>' acknowledgements.
-- KEYS = the window hashes; ARGV = now_ms, ttl grace ms, then per key: field, total,
-- expires_ms (when the window stops mattering). A window already over is not written.
-- Answers { fields raised }.
local now = tonumber(ARGV[1])
local grace = tonumber(ARGV[2]) or 0
local raised = 0
for i = 1, #KEYS do
  local field = ARGV[3 * i]
  local total = tonumber(ARGV[3 * i + 1])
  local expires = tonumber(ARGV[3 * i + 2])
  if expires > now then
    local stored = tonumber(redis.call('HGET', KEYS[i], field) or '0')
    if total > stored then
      redis.call('HSET', KEYS[i], field, string.format('%d', total))
      raised = raised + 1
    end
    redis.call('PEXPIRE', KEYS[i], string.format('%d', expires - now + grace))
  end
end
return { raised }
