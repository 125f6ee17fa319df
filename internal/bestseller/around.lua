-- A SKU's rank on a board and the entries around it, read atomically.
-- KEYS[1] the board; ARGV[1] the sku, ARGV[2] how many above and below.
-- Returns false when the SKU is not on the board, else
-- {rank (0-based), first rank of the range, {member, score, ...}}.
local r = redis.call('ZRANK', KEYS[1], ARGV[1])
if not r then return false end
local around = tonumber(ARGV[2])
local from = r - around
if from < 0 then from = 0 end
return {r, from, redis.call('ZRANGE', KEYS[1], from, r + around, 'WITHSCORES')}
