-- An admin write's step on the index, after PostgreSQL committed it.
-- KEYS: geo set, info hash, state hash. ARGV: "put" or "del", id, and for
-- put: lng, lat, the store as JSON.
-- gen is bumped in any case (a rebuild in progress must start over); the
-- index is changed only when built whole, since a missing index is rebuilt
-- whole from PostgreSQL. Returns 1 when the index was changed.
redis.call('HINCRBY', KEYS[3], 'gen', 1)
if redis.call('HEXISTS', KEYS[3], 'built') == 0 then return 0 end
if not index_whole() then
  -- Part of the index was lost: mark it missing so the next search
  -- rebuilds it (this write is in PostgreSQL already).
  redis.call('HDEL', KEYS[3], 'built')
  return 0
end
if ARGV[1] == 'put' then
  local added = redis.call('GEOADD', KEYS[1], ARGV[3], ARGV[4], ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[5])
  redis.call('HINCRBY', KEYS[3], 'stores', added)
else
  local removed = redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('HDEL', KEYS[2], ARGV[2])
  if removed == 1 then redis.call('HINCRBY', KEYS[3], 'stores', -1) end
end
return 1
