-- Swaps a rebuilt index in, unless an admin write bumped gen since the
-- rebuild read it. KEYS: geo, info, state, and the rebuilt geo and info.
-- ARGV[1]: the gen the rebuild read. Returns 1 when swapped, else 0 (the
-- copies dropped).
local gen = tonumber(redis.call('HGET', KEYS[3], 'gen') or '0')
if gen ~= tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[4], KEYS[5])
  return 0
end
for i = 1, 2 do
  if redis.call('EXISTS', KEYS[3 + i]) == 1 then
    redis.call('RENAME', KEYS[3 + i], KEYS[i])
    redis.call('PERSIST', KEYS[i])
  else
    redis.call('DEL', KEYS[i])
  end
end
-- stores is the size the three keys must keep (nearby.lua checks it).
redis.call('HSET', KEYS[3], 'built', '1', 'stores', redis.call('ZCARD', KEYS[1]))
return 1
