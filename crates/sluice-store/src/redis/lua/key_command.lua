-- One command on one key (the overrides' reads and writes: their keys span slots on a
-- cluster, so they cannot share one script). KEYS[1] = the key; ARGV = the command, then its
-- arguments after the key. Answers the reply as an array of strings (nil: empty).
local reply = redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))
if type(reply) == 'table' then
  return reply
elseif type(reply) == 'number' then
  return { string.format('%d', reply) }
elseif reply then
  return { reply }
end
return {}
