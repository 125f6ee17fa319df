-- Add units to one line of a cart, within the caps, and refresh the cart's
-- TTL: the cap checks and the write are one step, so two parallel adds
-- cannot both pass a cap. Every argument is checked before the first write.
--
-- KEYS[1] the cart (hash: sku -> quantity)
-- ARGV[1] sku   ARGV[2] units to add (>= 1)   ARGV[3] most lines a cart holds
-- ARGV[4] most units a line holds               ARGV[5] TTL (ms)
--
-- Returns the line's new quantity, or, changing nothing,
--   -1 the line is new and the cart already holds the most lines
--   -2 the line would hold more than the most units
local sku, n = ARGV[1], tonumber(ARGV[2])
local max_lines, max_qty, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if sku == '' or not n or n < 1 or n ~= math.floor(n) or not max_lines or not max_qty
    or not ttl or ttl < 1 then
  return redis.error_reply('ERR cart add: bad arguments')
end

local current = tonumber(redis.call('HGET', KEYS[1], sku) or '0')
if current == 0 and redis.call('HLEN', KEYS[1]) >= max_lines then return -1 end
if current + n > max_qty then return -2 end
local q = redis.call('HINCRBY', KEYS[1], sku, n)
redis.call('PEXPIRE', KEYS[1], ttl)
return q
