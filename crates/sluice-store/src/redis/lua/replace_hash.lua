-- Replaces a hash whole in one step, so no reader sees it half written (an override's hash).
-- KEYS[1] = the hash; ARGV = field, value, field, value, ... Answers nothing.
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV))
return {}
