-- Pay: the order goes from confirmed to paid, checked against its payment
-- window by Redis's clock in the same step. Expiry (the sweeper) and
-- cancellation change the same status field in their own atomic step
-- (inventory's release script with a guard), so of a payment racing them
-- exactly one wins. The transition event for PostgreSQL is added to the
-- order stream in the same step, so it cannot be lost in between.
--
-- Whose keys: all this package's.
-- KEYS[1] order status (hash)   KEYS[2] orders due (sorted set)
-- KEYS[3] order stream
-- ARGV[1] order id   ARGV[2] the provider's reference of the charge
-- ARGV[3] the paying request's W3C traceparent ('' or absent: not traced)
--
-- Returns {'ok', paid_ms}
--      or {'state', status, payment_ref}  (not confirmed: pending, paid...)
--      or {'late'}                        (confirmed, but past expires_ms)
--      or {'missing'}                     (no status: unknown or forgotten)
local id, ref = ARGV[1], ARGV[2]
if id == '' or ref == '' then return redis.error_reply('ERR pay: empty order id or reference') end
local st = redis.call('HMGET', KEYS[1], 'status', 'expires_ms', 'payment_ref', 'user_id', 'created_ms', 'items')
if not st[1] then return {'missing'} end
if st[1] ~= 'confirmed' then return {'state', st[1], st[3] or ''} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = tonumber(st[2] or '0') or 0
if expires > 0 and now >= expires then return {'late'} end

local now_s = string.format('%d', now)
redis.call('HSET', KEYS[1], 'status', 'paid', 'paid_ms', now_s, 'payment_ref', ref)
redis.call('ZREM', KEYS[2], id)
local event = {'kind', 'transition', 'order_id', id, 'user_id', st[4],
  'status', 'paid', 'at_ms', now_s, 'payment_ref', ref, 'created_ms', st[5], 'items', st[6]}
if ARGV[3] and ARGV[3] ~= '' then
  event[#event + 1], event[#event + 2] = 'traceparent', ARGV[3]
end
redis.call('XADD', KEYS[3], '*', unpack(event))
return {'ok', now_s}
