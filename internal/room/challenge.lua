-- Issue a challenge for the round the sale hash holds now: its key's value
-- names that round and the shopper, and join.lua accepts it only for both,
-- so a challenge of a replaced round is refused. Reading the round here,
-- not from an instance's cached view, also answers a round that was just
-- replaced by one without a room as having none.
--
-- KEYS[1] sale hash (inventory's: read only)   KEYS[2] the challenge's key
-- ARGV[1] the user id (text)   ARGV[2] the challenge's lifetime (ms)
--
-- Returns {'no_room'} (no round, or a round without a room), {'ended'}
-- (no join could use it), or {'ok', the room's challenge bits}.
local s = redis.call('HMGET', KEYS[1], 'round', 'room_rate', 'room_bits', 'ends_ms')
if not s[1] or not s[2] then return {'no_room'} end
local ends = tonumber(s[4] or '0')
if ends > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= ends then return {'ended'} end
end
redis.call('SET', KEYS[2], s[1] .. ' ' .. ARGV[1], 'PX', ARGV[2])
return {'ok', s[3] or '0'}
