#!lua
-- Open a new sale round for one SKU in one atomic step: the live state is
-- replaced and the buyer counts start from zero, so no buyer is ever
-- counted against the wrong round. (Orders already in the stream carry the
-- round they were reserved in.)
--
-- KEYS[1] sale state (hash)   KEYS[2] buyer counts (hash)
-- KEYS[3] released order ids (set)
-- The new state is published on ARGV[9], the SKU's changes channel, with
-- ARGV[10], PUBLISH or SPUBLISH (inventory's changes.go has the format and
-- the command; a channel '' publishes nothing). Its sixth field says
-- whether the round has a waiting room (1) or not (0).
-- Returns 1, 0 when a round as new or newer is already open, or -1 when
-- the script runs past apply_by_ms (the caller's deadline, by which it
-- has answered that the seeding failed: a stalled Redis that resumes must
-- not open the round after that answer).
-- ARGV: round, quantity, per_user_limit, starts_ms (0 = now), ends_ms
--       (0 = no end), price_cents, ttl_ms (0 = no expiry), apply_by_ms
--       (0 = no deadline), changes channel, publish command, then the
--       waiting room: admit_per_second (0 = no room), pass_ttl_ms,
--       challenge_bits, seed, seed_sha, secret (room.go: the room_*
--       fields of the sale hash; a round without a room has none; a
--       draw, which has no room, is rate 0 and secret 'draw': its hash
--       gets draw = 1, and the reservation rule refuses it),
--       and for one bucket of a round of several (buckets.go) three more:
--       the bucket's index, the round's buckets and the bucket's share of
--       the quantity, its available (a round of one bucket has none of
--       these fields: its hash is as before buckets)
if #ARGV ~= 16 and #ARGV ~= 19 then
  return redis.error_reply('ERR seed: want 16 or 19 arguments')
end
for _, i in ipairs({1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 17, 18, 19}) do
  local v = tonumber(ARGV[i] or '0')
  if not v or v < 0 or v ~= math.floor(v) then
    return redis.error_reply('ERR seed: argument ' .. i .. ' must be a non-negative integer')
  end
end
if ARGV[9] ~= '' and ARGV[10] ~= 'PUBLISH' and ARGV[10] ~= 'SPUBLISH' then
  return redis.error_reply('ERR seed: argument 10 must be PUBLISH or SPUBLISH')
end
if tonumber(ARGV[8]) > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[8]) then
    return -1
  end
end
-- Two admins seeding at once: round ids grow, so the newer round wins
-- whatever order the two scripts run in.
local current = tonumber(redis.call('HGET', KEYS[1], 'round') or '0')
if current >= tonumber(ARGV[1]) then
  return 0
end
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'round', ARGV[1], 'quantity', ARGV[2], 'available', ARGV[2],
  'limit', ARGV[3], 'starts_ms', ARGV[4], 'ends_ms', ARGV[5], 'price_cents', ARGV[6])
if #ARGV == 19 then
  redis.call('HSET', KEYS[1], 'available', ARGV[19], 'seeded', ARGV[19], 'bucket', ARGV[17], 'buckets', ARGV[18])
end
if tonumber(ARGV[11]) > 0 then
  if ARGV[14] == '' or ARGV[15] == '' or ARGV[16] == '' then
    return redis.error_reply('ERR seed: a room needs its seed, seed hash and secret')
  end
  redis.call('HSET', KEYS[1], 'room_rate', ARGV[11], 'room_pass_ttl_ms', ARGV[12],
    'room_bits', ARGV[13], 'room_seed', ARGV[14], 'room_seed_sha', ARGV[15], 'room_secret', ARGV[16])
elseif ARGV[16] == 'draw' then
  redis.call('HSET', KEYS[1], 'draw', '1')
end
if tonumber(ARGV[7]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
end
if ARGV[9] ~= '' then
  local roomed = tonumber(ARGV[11]) > 0 and '1' or '0'
  redis.call(ARGV[10], ARGV[9], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. ARGV[3] .. ' ' .. roomed)
end
return 1
