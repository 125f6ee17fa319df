-- Start a new generation of a tag and take (remove) its member set.
-- KEYS: tag generation, tag set   ARGV: new generation, ttl ms
-- Returns the members, which the caller then unlinks.
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local members = redis.call('SMEMBERS', KEYS[2])
redis.call('DEL', KEYS[2])
return members
