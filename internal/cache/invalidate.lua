-- Start a new generation of a tag and take (remove) its member set.
-- KEYS: tag generation, tag set
-- ARGV: new generation, ttl ms, invalidations channel, invalidation message
-- Returns the members, which the caller then unlinks. Other processes'
-- near caches hear of it in the same step.
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local members = redis.call('SMEMBERS', KEYS[2])
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return members
