-- Join or read a ticket: one shopper's entry in a round's room, in the
-- round's slot. A join makes the entry when there is none (early before
-- starts_at, late from then on) and answers it; a read answers it only.
-- Formats: docs/design/room.md; key names: roomkey/roomkey.go.
--
-- KEYS[1] sale hash (inventory's: read only)   KEYS[2] room state (hash)
-- KEYS[3] early entries (zset)   KEYS[4] late entries (zset)
-- KEYS[5] pass hash   KEYS[6] admission log (not touched here)
-- KEYS[7] the presented challenge (touched only with ARGV[6])
-- KEYS[8] the early entries in order of joining (list)
-- ARGV[1] round   ARGV[2] mode: 'join' or 'read'
-- ARGV[3] the user id's 16 bytes   ARGV[4] the user id (text)
-- ARGV[5] the early member's prefix: SHA-256(seed ":" entry_id) and the
--         user id's bytes (48 bytes)
-- ARGV[6] the challenge: '' none presented, 'ok' its work checked out,
--         'bad' it did not (the join checks the work; this script uses
--         the challenge up and checks it is alive and was issued to this
--         shopper in this round: challenge.lua stores "round user")
--
-- Returns {'stale'} (the live round is another: the caller rereads it),
-- {'no_room'}, {'ended'}, {'none'} (a read: no entry), {'challenge'}
-- (a join refused: no entry made), or
-- {'ok', new (1|0), early (1|0), joined_ms, rank in its set (-1 for an
--  early entry before starts_at), early entries, admitted, available,
--  now_ms, pass ('' none), pass round, expires_ms ('' none)}
local s = redis.call('HMGET', KEYS[1], 'round', 'starts_ms', 'ends_ms', 'room_rate', 'room_bits', 'available')
if s[1] ~= ARGV[1] then return {'stale'} end
if not s[4] then return {'no_room'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local starts, ends = tonumber(s[2]), tonumber(s[3])

local function ticket(new, early, joined, rank)
  local a = redis.call('HGET', KEYS[2], 'admitted') or '0'
  local e = redis.call('ZCARD', KEYS[3])
  local pass, pround, exp = '', '', ''
  local place = rank
  if early == 0 then place = e + rank end
  if place < tonumber(a) then -- admitted: its pass, if it has not run out
    local p = redis.call('HGET', KEYS[5], ARGV[4])
    if p then pround, pass, exp = string.match(p, '^(%S+) (%S+) (%S+)') end
  end
  return {'ok', tostring(new), tostring(early), string.format('%d', joined), tostring(rank), tostring(e), a, s[6] or '0',
    string.format('%d', now), pass or '', pround or '', exp or ''}
end

-- Before starts_at an early entry has no position to show and nothing is
-- admitted: its ticket needs no more reads (the early count and the rank
-- are sent as 0 and -1).
local function unshuffled(new, joined)
  return {'ok', tostring(new), '1', string.format('%d', joined), '-1', '0', '0', s[6] or '0',
    string.format('%d', now), '', '', ''}
end

-- The entry, if the shopper has one.
local score = redis.call('ZSCORE', KEYS[4], ARGV[3])
if score then
  return ticket(0, 0, math.floor(tonumber(score) / 1024), redis.call('ZRANK', KEYS[4], ARGV[3]))
end
local hit = redis.call('ZRANGE', KEYS[3], '[' .. ARGV[5], '[' .. ARGV[5] .. '\255\255\255\255\255\255\255',
  'BYLEX', 'LIMIT', 0, 1)
if hit[1] then
  local b = {string.byte(hit[1], 49, 54)}
  local joined = 0
  for i = 1, 6 do joined = joined * 256 + b[i] end
  if now < starts then return unshuffled(0, joined) end
  return ticket(0, 1, joined, redis.call('ZRANK', KEYS[3], hit[1]))
end
if ARGV[2] ~= 'join' then return {'none'} end
if ends > 0 and now >= ends then return {'ended'} end

-- A new entry: behind its challenge, used up whether it is right or not.
if tonumber(s[5] or '0') > 0 then
  if ARGV[6] == '' then return {'challenge'} end
  local owner = redis.call('GET', KEYS[7])
  redis.call('DEL', KEYS[7])
  if owner ~= ARGV[1] .. ' ' .. ARGV[4] or ARGV[6] ~= 'ok' then return {'challenge'} end
end
if now < starts then
  local ms, b = now, {}
  for i = 6, 1, -1 do b[i] = ms % 256; ms = math.floor(ms / 256) end
  local member = ARGV[5] .. string.char(unpack(b))
  redis.call('ZADD', KEYS[3], 0, member)
  -- The early set's order is the seed's, secret until starts_at; this
  -- list keeps the order of joining, which the entry list shows till then.
  redis.call('RPUSH', KEYS[8], string.sub(member, 33))
  return unshuffled(1, now)
end
-- Late: in order of arrival; 1024 a millisecond before the score runs
-- ahead of the clock (more than one Redis serves).
local last = tonumber(redis.call('HGET', KEYS[2], 'late_last') or '0')
local sc = math.max(now * 1024, last + 1)
redis.call('HSET', KEYS[2], 'late_last', string.format('%d', sc))
redis.call('ZADD', KEYS[4], sc, ARGV[3])
return ticket(1, 0, math.floor(sc / 1024), redis.call('ZRANK', KEYS[4], ARGV[3]))
