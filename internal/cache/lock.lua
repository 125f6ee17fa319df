-- Read an entry or, when there is none, take its fill lock.
-- KEYS: entry, lock   ARGV: owner token, lock ttl ms
-- Returns {1, value} when the entry exists, {2} when the lock was taken,
-- {0} when another owner holds it.
local value = redis.call('GET', KEYS[1])
if value then
  return {1, value}
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {2}
end
return {0}
