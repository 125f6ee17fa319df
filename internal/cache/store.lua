-- Store a filled entry only if no write or invalidation happened since the
-- filler read the generations (see package doc: the stale-set race).
-- KEYS: entry, key generation, tag generation x n, tag set x n
-- ARGV: value, entry ttl ms, tag set ttl ms, key generation seen,
--       tag generation seen x n        ("" = the generation did not exist)
local n = (#KEYS - 2) / 2
for i = 0, n do
  local current = redis.call('GET', KEYS[2 + i]) or ''
  if current ~= ARGV[4 + i] then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
for i = 1, n do
  local set = KEYS[2 + n + i]
  redis.call('SADD', set, KEYS[1])
  redis.call('PEXPIRE', set, ARGV[3])
end
return 1
