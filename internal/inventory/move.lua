-- Move units into a shopper's home bucket from the round's others, on a
-- single Redis: one atomic step over every bucket of the round, so no unit
-- is ever outside a bucket (docs/design/buckets.md; a cluster needs the
-- two-step move with a record, not built yet).
--
-- KEYS[1..B] the round's buckets' sale hashes, in bucket order
-- ARGV[1] the home bucket's index   ARGV[2] units the purchase needs
-- It brings the home up to the need, or to an even share of what the
-- round has left if that is more, taking first what the others hold
-- above their share, then from the fullest.
-- Returns {'ok', units moved}, {'short', units in the round} when the
-- round as a whole has fewer than the need, or {'stale'} when the
-- buckets are not one round of B (a seeding or a close is under way).
local home, need = tonumber(ARGV[1]) + 1, tonumber(ARGV[2])
local n = #KEYS
local round, avail, released, total = nil, {}, 0, 0
for i = 1, n do
  local s = redis.call('HMGET', KEYS[i], 'round', 'available', 'buckets', 'bucket', 'released')
  if not s[1] or (round and s[1] ~= round) or tonumber(s[3]) ~= n or tonumber(s[4]) ~= i - 1 then
    return {'stale'}
  end
  round = s[1]
  avail[i] = tonumber(s[2])
  total = total + avail[i]
  released = released + tonumber(s[5] or '0')
end
if total < need then return {'short', total} end
local share = math.floor(total / n)
local missing = math.max(need, share) - avail[home]
local moved = 0
local function take(i, k)
  if k <= 0 then return end
  redis.call('HINCRBY', KEYS[i], 'available', -k)
  redis.call('HINCRBY', KEYS[i], 'moved_out', k)
  avail[i], missing, moved = avail[i] - k, missing - k, moved + k
end
for i = 1, n do
  if i ~= home and missing > 0 then take(i, math.min(missing, avail[i] - share)) end
end
while missing > 0 do
  local best = nil
  for i = 1, n do
    if i ~= home and (not best or avail[i] > avail[best]) then best = i end
  end
  take(best, math.min(missing, avail[best]))
end
if moved > 0 then
  redis.call('HINCRBY', KEYS[home], 'available', moved)
  redis.call('HINCRBY', KEYS[home], 'moved_in', moved)
end
-- The round's releases as of now: a unit given back elsewhere and moved
-- here is resold under them (lines.lua's round_released).
redis.call('HSET', KEYS[home], 'round_released', released)
return {'ok', moved}
