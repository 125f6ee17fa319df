-- Write an entry through, unless another writer got in between.
-- KEYS: entry, key generation, tag set x n
-- ARGV: value, entry ttl ms, generation seen by the fence ("" = none),
--       new generation, generation/tag set ttl ms, invalidations channel,
--       invalidation message
-- Returns 1 when stored, 0 when the entry was dropped instead. Either way
-- other processes' near caches hear that the key changed.
local stored = 0
if (redis.call('GET', KEYS[2]) or '') == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  for i = 3, #KEYS do
    redis.call('SADD', KEYS[i], KEYS[1])
    redis.call('PEXPIRE', KEYS[i], ARGV[5])
  end
  stored = 1
else
  redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
redis.call('PUBLISH', ARGV[6], ARGV[7])
return stored
