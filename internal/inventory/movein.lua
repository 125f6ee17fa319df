-- Move in: the second step of a move on a Redis Cluster, in the target
-- bucket's slot, once per move id (moveout.lua has the first step). The
-- units join `available` and `moved_in`, the releases they carry
-- `released_in`. A target of another round adds nothing: the units were
-- the round's that is gone, as every unsold unit of a replaced round.
--
-- KEYS[1] the target bucket's sale hash   KEYS[2] its set of the move ids
--         received
-- ARGV[1] move id   ARGV[2] the round   ARGV[3] units   ARGV[4] releases
-- Returns 1 (added), 0 (added before) or -1 (another round).
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
if redis.call('HGET', KEYS[1], 'round') ~= ARGV[2] then return -1 end
redis.call('HINCRBY', KEYS[1], 'available', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'moved_in', ARGV[3])
if tonumber(ARGV[4]) > 0 then redis.call('HINCRBY', KEYS[1], 'released_in', ARGV[4]) end
redis.call('SADD', KEYS[2], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
