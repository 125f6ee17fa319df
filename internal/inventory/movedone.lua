-- Move done: the last step of a move on a Redis Cluster, in the source
-- bucket's slot, after movein.lua: the record goes, and its units leave
-- `moving` (they are in the target now). Idempotent: a second run finds
-- no record.
--
-- KEYS[1] the source bucket's sale hash   KEYS[2] its moves record
-- KEYS[3] the source partition's moves index
-- ARGV[1] move id   ARGV[2] the index member
-- Returns 1, or 0 when the record was gone.
local rec = redis.call('HGET', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
if not rec then return 0 end
local _, k, _, round = string.match(rec, '^(%d+) (%d+) (%d+) (%d+)$')
if redis.call('HGET', KEYS[1], 'round') == round then
  redis.call('HINCRBY', KEYS[1], 'moving', -tonumber(k))
end
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
