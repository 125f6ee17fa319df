-- Swaps rebuilt boards in, unless a board changed since the rebuild read
-- the generation (its snapshot may then miss that change).
--
-- KEYS[1]       the generation counter
-- KEYS[2..1+n]  the live boards, KEYS[2+n..1+2n] their rebuilt copies
-- KEYS[2+2n..]  mark hashes, by index
-- ARGV[1] the generation the rebuild read, ARGV[2] n,
-- ARGV[3..2+n] each live board's expiry (unix s, 0: none),
-- then the number of recent orders and per order: mark hash index,
-- order id, mark expiry, mark ('c': the snapshot counted it; 'x': it was
-- cancelled or expired, left out of the snapshot).
-- Returns 1 when swapped, 0 (copies dropped) when the generation moved.
local n = tonumber(ARGV[2])
local function drop()
  for i = 1, n do redis.call('DEL', KEYS[1 + n + i]) end
end
local gen = tonumber(redis.call('GET', KEYS[1]) or '0')
if gen ~= tonumber(ARGV[1]) then
  drop()
  return 0
end
for i = 1, n do
  local live, copy, exp = KEYS[1 + i], KEYS[1 + n + i], tonumber(ARGV[2 + i])
  if redis.call('EXISTS', copy) == 1 then
    redis.call('RENAME', copy, live)
    if exp > 0 then redis.call('EXPIREAT', live, exp) else redis.call('PERSIST', live) end
  else
    redis.call('DEL', live)
  end
end
-- The snapshot counted these orders (or left them out as taken back): a
-- hook still to come must not count (or take back) them again.
local pos = 3 + n
local recent = tonumber(ARGV[pos])
for _ = 1, recent do
  local marks, id, exp, mark = KEYS[tonumber(ARGV[pos + 1])], ARGV[pos + 2], tonumber(ARGV[pos + 3]), ARGV[pos + 4]
  pos = pos + 4
  if mark == 'x' then
    redis.call('HSET', marks, id, 'x')
  else
    redis.call('HSETNX', marks, id, 'c')
  end
  if redis.call('EXPIRETIME', marks) < exp then redis.call('EXPIREAT', marks, exp) end
end
redis.call('INCR', KEYS[1])
return 1
