-- Move out: the first step of moving units between two buckets of a round
-- on a Redis Cluster, in the source bucket's slot (docs/design/buckets.md,
-- "An empty home bucket"). It takes up to k units out of `available`,
-- counts them in `moved_out` and `moving`, and records the move, so that
-- a crash before the other steps leaves a record the sweeper finishes
-- (movein.lua, then movedone.lua), and never a unit in no bucket.
--
-- Units given back to this bucket (released, and released_in from moves
-- into it) travel on as a share of the units moved, counted in
-- released_out: the target's lines carry them to PostgreSQL's CHECK.
--
-- KEYS[1] the source bucket's sale hash   KEYS[2] its moves record (hash:
--         move id -> 'target_bucket units released round')
-- KEYS[3] the source partition's moves index (zset: member by deadline)
-- ARGV[1] move id   ARGV[2] the round   ARGV[3] units wanted
-- ARGV[4] the target bucket   ARGV[5] deadline (ms)   ARGV[6] the index
--         member ('sku buckets source id')
-- Returns {units taken, given back units among them} ({0, 0}: none, or
-- another round).
local s = redis.call('HMGET', KEYS[1], 'round', 'available', 'released', 'released_in', 'released_out')
if s[1] ~= ARGV[2] then return {0, 0} end
local k = math.min(tonumber(ARGV[3]), tonumber(s[2] or '0'))
if k <= 0 then return {0, 0} end
local carried = tonumber(s[3] or '0') + tonumber(s[4] or '0') - tonumber(s[5] or '0')
local r = math.max(math.min(k, carried), 0)
redis.call('HINCRBY', KEYS[1], 'available', -k)
redis.call('HINCRBY', KEYS[1], 'moved_out', k)
redis.call('HINCRBY', KEYS[1], 'moving', k)
if r > 0 then redis.call('HINCRBY', KEYS[1], 'released_out', r) end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4] .. ' ' .. k .. ' ' .. r .. ' ' .. ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[6])
return {k, r}
