-- Set one line of a cart to a quantity, 0 removing it, within the caps; a
-- change refreshes the cart's TTL (removing a line that is not there is no
-- change). Every argument is checked before the first write.
--
-- KEYS[1] the cart (hash: sku -> quantity)
-- ARGV[1] sku   ARGV[2] the quantity (>= 0)   ARGV[3] most lines a cart holds
-- ARGV[4] most units a line holds               ARGV[5] TTL (ms)
--
-- Returns the quantity, or, changing nothing,
--   -1 the line is new and the cart already holds the most lines
--   -2 the quantity is over the most units
local sku, q = ARGV[1], tonumber(ARGV[2])
local max_lines, max_qty, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if sku == '' or not q or q < 0 or q ~= math.floor(q) or not max_lines or not max_qty
    or not ttl or ttl < 1 then
  return redis.error_reply('ERR cart set: bad arguments')
end

if q == 0 then
  -- The hash (and its TTL) goes away with its last field.
  if redis.call('HDEL', KEYS[1], sku) == 1 and redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
  return 0
end
if q > max_qty then return -2 end
if redis.call('HEXISTS', KEYS[1], sku) == 0 and redis.call('HLEN', KEYS[1]) >= max_lines then
  return -1
end
redis.call('HSET', KEYS[1], sku, q)
redis.call('PEXPIRE', KEYS[1], ttl)
return q
