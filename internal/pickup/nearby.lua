-- A nearby search. KEYS: geo set, info hash, state hash. ARGV: lng, lat,
-- radius in km, count, and for a circle that crosses the antimeridian a
-- second centre on its far side (lng2, lat2) with the radius that reaches
-- the whole circle from there (radius2); '' for none. Returns false when
-- the index is not built whole, else {{id, distance, json}, ...} nearest
-- first.
if not index_whole() then return false end
local count = tonumber(ARGV[4])
local hits = redis.call('GEOSEARCH', KEYS[1], 'FROMLONLAT', ARGV[1], ARGV[2],
  'BYRADIUS', ARGV[3], 'km', 'ASC', 'COUNT', count, 'WITHDIST')
local found = {}
for i, h in ipairs(hits) do found[i] = {h[1], tonumber(h[2])} end
if ARGV[5] ~= '' then
  -- GEOSEARCH does not reach across ±180, so the far side is searched from
  -- there, every hit's distance measured from the real centre with
  -- Redis's own haversine, and the two lists merged.
  local seen = {}
  for _, h in ipairs(hits) do seen[h[1]] = true end
  local r = 6372797.560856
  local lat1, lng1 = math.rad(tonumber(ARGV[2])), math.rad(tonumber(ARGV[1]))
  local limit = tonumber(ARGV[3])
  local far = redis.call('GEOSEARCH', KEYS[1], 'FROMLONLAT', ARGV[5], ARGV[6],
    'BYRADIUS', ARGV[7], 'km', 'WITHCOORD')
  for _, h in ipairs(far) do
    if not seen[h[1]] then
      local lat2, lng2 = math.rad(tonumber(h[2][2])), math.rad(tonumber(h[2][1]))
      local u, v = math.sin((lat2 - lat1) / 2), math.sin((lng2 - lng1) / 2)
      local d = 2 * r * math.asin(math.sqrt(u * u + math.cos(lat1) * math.cos(lat2) * v * v)) / 1000
      if d <= limit then
        seen[h[1]] = true
        found[#found + 1] = {h[1], d}
      end
    end
  end
  table.sort(found, function(a, b) return a[2] < b[2] end)
  while #found > count do table.remove(found) end
end
if #found == 0 then return {} end
local ids = {}
for i, h in ipairs(found) do ids[i] = h[1] end
local infos = redis.call('HMGET', KEYS[2], unpack(ids))
local out = {}
for i, h in ipairs(found) do out[i] = {h[1], string.format('%.4f', h[2]), infos[i] or ''} end
return out
