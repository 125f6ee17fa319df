-- A draw's won entry becomes a paid order in one atomic step
-- (internal/draw): its units are taken from the sale hash when its round
-- is still the live one (past the draw's refusal: they were won, not
-- bought), and the order event and its paid transition go on the home
-- stream, for the writer to persist like any order. The order id is made
-- from the entry's, so a second run finds the status and does nothing.
--
-- KEYS[1] order stream   KEYS[2] order status (hash)
-- KEYS[3] sale state (inventory's)   KEYS[4] buyer counts
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] round   ARGV[4] units
-- ARGV[5] unit price   ARGV[6] sku   ARGV[7] payment reference
-- ARGV[8] status TTL (ms)   ARGV[9] partition
-- Returns 'dup' or 'ok'.
if redis.call('EXISTS', KEYS[2]) == 1 then return 'dup' end
local units, price = tonumber(ARGV[4]), tonumber(ARGV[5])
if not units or units < 1 or not price or price < 0 or ARGV[7] == '' then
  return redis.error_reply('ERR won: bad units, price or payment reference')
end
local s = redis.call('HMGET', KEYS[3], 'round', 'released')
local released = 0
if s[1] == ARGV[3] then
  redis.call('HINCRBY', KEYS[3], 'available', -units)
  redis.call('HINCRBY', KEYS[4], ARGV[2], units)
  released = tonumber(s[2] or '0')
end
local item = {sku = ARGV[6], quantity = units, price_cents = price, round_id = tonumber(ARGV[3])}
if released ~= 0 then item.released = released end
local items = cjson.encode({item})
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local total = string.format('%d', units * price)
redis.call('XADD', KEYS[1], '*', 'order_id', ARGV[1], 'user_id', ARGV[2], 'created_ms', now,
  'total_cents', total, 'items', items, 'expires_ms', '0')
redis.call('XADD', KEYS[1], '*', 'kind', 'transition', 'order_id', ARGV[1], 'user_id', ARGV[2],
  'status', 'paid', 'at_ms', now, 'payment_ref', ARGV[7], 'created_ms', now, 'items', items)
local fields = {'user_id', ARGV[2], 'status', 'paid', 'items', items, 'total_cents', total,
  'created_ms', now, 'expires_ms', '0', 'paid_ms', now, 'payment_ref', ARGV[7]}
if ARGV[9] ~= '0' then
  fields[#fields + 1], fields[#fields + 2] = 'partition', ARGV[9]
end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('PEXPIRE', KEYS[2], ARGV[8])
return 'ok'
