-- Release a lock only if the caller still owns it.
-- KEYS: lock   ARGV: owner token
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
