#!lua
-- Release: the atomic inverse of a reservation, for one order's lines.
-- Every line whose round is still the live one gives its units back to
-- `available` and takes them off the buyer's count; a line of an older
-- round gives nothing back (that round's stock and counts are gone with
-- it). Each line is released once per order id: the order id joins the
-- SKU's released set, which lives and dies with the round.
--
-- An optional guard makes the release conditional on, and atomic with, a
-- state change of the caller's (the order's status, say): the field of the
-- caller's hash must hold one of the allowed values, and is set to the new
-- one in the same step. The caller owns that key and its format; this
-- script only compares and sets the one field it is handed.
--
-- An optional outbox entry (a stream of the caller's, and the entry's
-- fields) is added in the same step when the release happens, so that the
-- caller's record of it can never be lost in between.
--
-- All reads and checks come before the first write.
--
-- KEYS[1] guard hash (touched only when ARGV[3] ~= '')
-- KEYS[2 + 3(i-1)] sale state of line i (bucket 0's on a single Redis, the
--         buyer's home bucket's on a cluster: release.go's releaseInto)
-- KEYS[3 + 3(i-1)] its buyer counts (the buyer's home bucket's)
-- KEYS[4 + 3(i-1)] the released set of KEYS[2 + 3(i-1)]
-- ARGV[1] order id   ARGV[2] user id
-- ARGV[3] guard field ('' for none)   ARGV[4] new value   ARGV[5] allowed
--         values, comma-separated
-- ARGV[6] number of lines n, then ARGV[7 + 5(i-1)] sku, ARGV[8 + 5(i-1)]
--         quantity, ARGV[9 + 5(i-1)] round id, ARGV[10 + 5(i-1)] the SKU's
--         changes channel ('' for none): a line that gives units back
--         publishes the state it leaves there (inventory's changes.go),
--         ARGV[11 + 5(i-1)] the buyer's home bucket that KEYS[3 + 3(i-1)]
--         names (0 in a round of one bucket)
-- KEYS[2 + 3n] outbox stream (touched only when m > 0)
-- ARGV[7 + 5n] number of outbox fields m, then m field-value pairs
-- ARGV[8 + 5n + 2m] '1': the outbox entry only when units go back (a
--         record of the releases that gave something, not of the calls),
--         '0': whenever the guard passes
-- ARGV[9 + 5n + 2m] the publish command, PUBLISH or SPUBLISH (inventory's
--         PublishCommand: SPUBLISH for the sharded channels of a cluster)
--
-- Returns {'ok', units given back, stale lines, lines released before},
--      {'refused', current guard value or ''},
--      or {'bucket', sku, the round's buckets}: a line named another
--      bucket than the buyer's home
local order_id, user = ARGV[1], ARGV[2]
local gfield, gto, gfrom = ARGV[3], ARGV[4], ARGV[5]
local n = tonumber(ARGV[6])

local function bad(msg) return redis.error_reply('ERR release: ' .. msg) end
if order_id == '' or user == '' then return bad('empty order or user id') end
if not n or n < 1 or n ~= math.floor(n) or #KEYS ~= 2 + 3 * n then
  return bad('bad line count')
end
local m = tonumber(ARGV[7 + 5 * n])
if not m or m < 0 or m ~= math.floor(m) or #ARGV ~= 9 + 5 * n + 2 * m then
  return bad('bad outbox')
end
local given_only, publish = ARGV[#ARGV - 1], ARGV[#ARGV]
if given_only ~= '0' and given_only ~= '1' then return bad('bad outbox condition') end
if publish ~= 'PUBLISH' and publish ~= 'SPUBLISH' then return bad('bad publish command') end
if gfield ~= '' and (gto == '' or gfrom == '') then return bad('guard without values') end

local lines, seen = {}, {}
for i = 1, n do
  local a = 2 + 5 * i
  local sku, qty, round, bucket = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 4])
  if sku == '' or seen[sku] then return bad('empty or duplicate sku') end
  if not qty or qty < 1 or qty ~= math.floor(qty) then return bad('bad quantity') end
  if not round or round < 1 or round ~= math.floor(round) then return bad('bad round') end
  if not bucket or bucket < 0 or bucket ~= math.floor(bucket) then return bad('bad bucket') end
  seen[sku] = true
  lines[i] = {sku = sku, qty = qty, round = round, bucket = bucket, channel = ARGV[a + 3],
    sale = KEYS[3 * i - 1], buyers = KEYS[3 * i], released = KEYS[1 + 3 * i]}
end

if gfield ~= '' then
  local cur = redis.call('HGET', KEYS[1], gfield) or ''
  local allowed = false
  for v in string.gmatch(gfrom, '[^,]+') do
    if v == cur then allowed = true end
  end
  if not allowed then return {'refused', cur} end
end

-- Decide every line before writing any.
for _, l in ipairs(lines) do
  l.before = redis.call('SISMEMBER', l.released, order_id) == 1
  local s = redis.call('HMGET', l.sale, 'round', 'buckets', 'bucket')
  l.live = tonumber(s[1] or '0') == l.round
  local buckets = tonumber(s[2] or '1')
  l.bucketed = buckets > 1
  l.bucket_of = ''
  if l.bucketed then l.bucket_of = ' ' .. (s[3] or '0') .. ' ' .. s[2] end
  local home = 0
  if l.bucketed then home = tonumber(string.sub(redis.sha1hex(user), 1, 8), 16) % buckets end
  if l.live and not l.before and home ~= l.bucket then
    return {'bucket', l.sku, tostring(buckets)}
  end
end

local units, stale, before = 0, 0, 0
for _, l in ipairs(lines) do
  if l.before then
    before = before + 1
  elseif not l.live then
    stale = stale + 1
  else
    local left = redis.call('HINCRBY', l.sale, 'available', l.qty)
    redis.call('HINCRBY', l.sale, 'released', l.qty)
    if redis.call('HINCRBY', l.buyers, user, -l.qty) <= 0 then
      redis.call('HDEL', l.buyers, user)
    end
    redis.call('SADD', l.released, order_id)
    local ttl = redis.call('PTTL', l.sale)
    if ttl > 0 then redis.call('PEXPIRE', l.released, ttl) end
    units = units + l.qty
    -- Bucket 0's available is not a bucketed round's: its message names
    -- the bucket, and readers read the round again (changes.go).
    if l.channel ~= '' then
      local w = redis.call('HMGET', l.sale, 'starts_ms', 'ends_ms', 'limit')
      redis.call(publish, l.channel, string.format('%d %d %s %s %s', l.round, left, w[1], w[2], w[3] or '0') .. l.bucket_of)
    end
  end
end
if gfield ~= '' then
  redis.call('HSET', KEYS[1], gfield, gto)
end
if m > 0 and (given_only == '0' or units > 0) then
  local entry = {}
  for i = 8 + 5 * n, 7 + 5 * n + 2 * m do entry[#entry + 1] = ARGV[i] end
  redis.call('XADD', KEYS[2 + 3 * n], '*', unpack(entry))
end
return {'ok', string.format('%d', units), tostring(stale), tostring(before)}
