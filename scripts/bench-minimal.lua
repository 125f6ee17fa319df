-- The minimal purchase, make bench's second bare reference beside
-- reserve.lua: what any flash-sale script must do and nothing more (no
-- sale window, idempotency, per-user limit, status, payment due time or
-- stock event). KEYS[1] the stock (a string), KEYS[2] the buyers hash,
-- KEYS[3] the order stream; ARGV[1] the buyer, ARGV[2] the quantity.
local qty = tonumber(ARGV[2])
local left = tonumber(redis.call('GET', KEYS[1]) or '0')
if left < qty then return 0 end
local bought = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
redis.call('DECRBY', KEYS[1], qty)
redis.call('HINCRBY', KEYS[2], ARGV[1], qty)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', '100000', '*', 'user', ARGV[1], 'qty', qty, 'had', bought)
return 1
