-- A nearby search. KEYS: geo set, info hash, state hash. ARGV: lng, lat,
-- radius in km, count. Returns false when the index is not built, else
-- {{id, distance, json}, ...} nearest first.
if redis.call('HEXISTS', KEYS[3], 'built') == 0 then return false end
local hits = redis.call('GEOSEARCH', KEYS[1], 'FROMLONLAT', ARGV[1], ARGV[2],
  'BYRADIUS', ARGV[3], 'km', 'ASC', 'COUNT', ARGV[4], 'WITHDIST')
if #hits == 0 then return {} end
local ids = {}
for i, h in ipairs(hits) do ids[i] = h[1] end
local infos = redis.call('HMGET', KEYS[2], unpack(ids))
local out = {}
for i, h in ipairs(hits) do out[i] = {h[1], h[2], infos[i] or ''} end
return out
