#!lua
-- Restore: replace one SKU's live round, its buyer counts and its released
-- set with a state rebuilt elsewhere (`shop recover`, after a Redis
-- failover lost writes), in one atomic step, only if the sale hash still
-- holds what the caller read before it gathered that state (the fence):
-- every reservation and every release changes available or released, so
-- an unchanged fence means no unit of this SKU moved in between, and the
-- rebuilt state is still exact.
--
-- Everything is validated before the first write: the counts add up
-- (quantity == available + the buyers' units), every number is a
-- non-negative integer. A state equal to the one in place writes nothing
-- (so a second run changes nothing and publishes nothing).
--
-- KEYS[1] sale state (hash)   KEYS[2] buyer counts (hash)
-- KEYS[3] released order ids (set)
-- ARGV[1] the fence: 'round available released' as Fence read them
-- ARGV[2] round   ARGV[3] quantity   ARGV[4] per_user_limit
-- ARGV[5] starts_ms   ARGV[6] ends_ms   ARGV[7] price_cents
-- ARGV[8] ttl_ms (0: no expiry)   ARGV[9] available   ARGV[10] released units
-- ARGV[11] changes channel ('' for none)
-- ARGV[12] number of buyers b, then b pairs user id, units
-- ARGV[13 + 2b] number of released order ids r, then r ids
-- ARGV[14 + 2b + r .. 19 + 2b + r] the waiting room, as seed.lua takes it
--         (admit_per_second 0: none)
-- ARGV[20 + 2b + r] the publish command, PUBLISH or SPUBLISH (inventory's
--         PublishCommand: SPUBLISH for the sharded channels of a cluster)
-- ARGV[21 + 2b + r] number of a stock bucket's own fields e (0: a round of
--         one bucket), then e pairs field, value (docs/design/buckets.md,
--         "Recovery"): bucket, buckets, seeded, ... Then the hash is one
--         bucket of a round: its buyers hold seeded - available (not
--         quantity - available), KEYS[4] and KEYS[5] are its moves record
--         and moved set, which go (no move under way survives a rebuild),
--         and its message names the bucket.
-- Returns {'ok', 1 changed | 0 unchanged} or {'moved', current fence}
local function bad(msg) return redis.error_reply('ERR restore: ' .. msg) end
local function int(i)
  local v = tonumber(ARGV[i])
  if not v or v < 0 or v ~= math.floor(v) then return nil end
  return v
end
for i = 2, 10 do
  if not int(i) then return bad('argument ' .. i .. ' must be a non-negative integer') end
end
if int(2) < 1 then return bad('round must be positive') end
local quantity, available = int(3), int(9)
if available > quantity then return bad('available exceeds quantity') end
local nb = tonumber(ARGV[12])
if not nb or nb < 0 or nb ~= math.floor(nb) or #ARGV < 13 + 2 * nb then return bad('bad buyer count') end
local buyers, held = {}, 0
for i = 1, nb do
  local user, units = ARGV[11 + 2 * i], tonumber(ARGV[12 + 2 * i])
  if user == '' or buyers[user] then return bad('empty or duplicate buyer') end
  if not units or units < 1 or units ~= math.floor(units) then return bad('bad units of ' .. user) end
  buyers[user] = ARGV[12 + 2 * i]
  held = held + units
end
local nr = tonumber(ARGV[13 + 2 * nb])
if not nr or nr < 0 or nr ~= math.floor(nr) or #ARGV < 21 + 2 * nb + nr then return bad('bad released count') end
local publish, last = ARGV[20 + 2 * nb + nr], 13 + 2 * nb + nr -- last: the last released id's index
local ne = tonumber(ARGV[21 + 2 * nb + nr])
if not ne or ne < 0 or ne ~= math.floor(ne) or #ARGV ~= 21 + 2 * nb + nr + 2 * ne then return bad('bad bucket field count') end
local own = {}
for i = 1, ne do
  local f, v = ARGV[20 + 2 * nb + nr + 2 * i], ARGV[21 + 2 * nb + nr + 2 * i]
  if not tonumber(v) or tonumber(v) < 0 then return bad('bad bucket field ' .. f) end
  own[f] = v
end
local units = quantity
if ne > 0 then
  units = tonumber(own.seeded or '')
  if not units or not own.bucket or not own.buckets or #KEYS ~= 5 then return bad('a bucket needs its seeded, bucket, buckets and keys') end
end
if held ~= units - available then
  return bad(string.format('%d units != available %d + %d units held', units, available, held))
end
-- The round's waiting room comes back with it: without its fields the
-- purchase scripts would sell it without passes.
local room = {}
local r = last + 1
local rate = tonumber(ARGV[r])
if not rate or rate < 0 or rate ~= math.floor(rate) then return bad('bad room rate') end
if rate > 0 then
  if ARGV[r + 3] == '' or ARGV[r + 4] == '' or ARGV[r + 5] == '' then return bad('a room needs its seed and secret') end
  room = {room_rate = ARGV[r], room_pass_ttl_ms = ARGV[r + 1], room_bits = ARGV[r + 2],
    room_seed = ARGV[r + 3], room_seed_sha = ARGV[r + 4], room_secret = ARGV[r + 5]}
elseif ARGV[r + 5] == 'draw' then
  room = {draw = '1'} -- a draw's mark rides in the room's slot (seed.lua): it must come back too
end
if publish ~= 'PUBLISH' and publish ~= 'SPUBLISH' then return bad('bad publish command') end

local cur = redis.call('HMGET', KEYS[1], 'round', 'available', 'released')
local fence = (cur[1] or '') .. ' ' .. (cur[2] or '') .. ' ' .. (cur[3] or '')
if fence ~= ARGV[1] then return {'moved', fence} end

-- Is the state in place already the one asked for?
local same = true
local want = {round = ARGV[2], quantity = ARGV[3], limit = ARGV[4], starts_ms = ARGV[5],
  ends_ms = ARGV[6], price_cents = ARGV[7], available = ARGV[9], released = ARGV[10]}
local flat = redis.call('HGETALL', KEYS[1])
local have = {released = '0'} -- a round nothing was released from yet has no field
for i = 1, #flat, 2 do have[flat[i]] = flat[i + 1] end
local fields = 8
for k, v in pairs(room) do want[k] = v; fields = fields + 1 end
for k, v in pairs(own) do want[k] = v; fields = fields + 1 end
for k, v in pairs(want) do
  if have[k] ~= v then same = false end
end
if #flat > 2 * fields then same = false end -- a field this script does not write
if same and redis.call('HLEN', KEYS[2]) ~= nb then same = false end
if same then
  for user, units in pairs(buyers) do
    if redis.call('HGET', KEYS[2], user) ~= units then same = false; break end
  end
end
if same and redis.call('SCARD', KEYS[3]) ~= nr then same = false end
if same then
  for i = 14 + 2 * nb, last do
    if redis.call('SISMEMBER', KEYS[3], ARGV[i]) == 0 then same = false; break end
  end
end
if same then return {'ok', 0} end

redis.call('UNLINK', unpack(KEYS))
redis.call('HSET', KEYS[1], 'round', ARGV[2], 'quantity', ARGV[3], 'available', ARGV[9],
  'limit', ARGV[4], 'starts_ms', ARGV[5], 'ends_ms', ARGV[6], 'price_cents', ARGV[7], 'released', ARGV[10])
for k, v in pairs(room) do redis.call('HSET', KEYS[1], k, v) end
for k, v in pairs(own) do redis.call('HSET', KEYS[1], k, v) end
for user, units in pairs(buyers) do
  redis.call('HSET', KEYS[2], user, units)
end
for i = 14 + 2 * nb, last do
  redis.call('SADD', KEYS[3], ARGV[i])
end
local ttl = tonumber(ARGV[8])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  if nb > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
  if nr > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
end
if ARGV[11] ~= '' then
  local last = room.room_rate and '1' or '0'
  if ne > 0 then last = own.bucket .. ' ' .. own.buckets end -- a bucket's available: readers sum the round
  redis.call(publish, ARGV[11], ARGV[2] .. ' ' .. ARGV[9] .. ' ' .. ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[4] .. ' ' .. last)
end
return {'ok', 1}
