-- The reservation rule of reserve.lua, shared by the saga's scripts on a
-- Redis Cluster (hold.lua, commit.lua): Go prepends this file to each.
-- A line is open, within the buyer's limit and in stock, judged as
-- reserve.lua judges it, and refusals are ranked the same way, so a
-- cross-shard checkout is refused exactly as on a single Redis.
--
-- read_lines reads n lines: ARGV[a + 3(i-1)] sku, qty, changes channel;
-- KEYS[k + 2(i-1)] sale state, buyer counts (inventory's keys and format).
local function read_lines(n, a, k)
  local lines, seen = {}, {}
  for i = 1, n do
    local j = a + 3 * (i - 1)
    local sku, qty = ARGV[j], tonumber(ARGV[j + 1])
    if not sku or sku == '' or seen[sku] then return nil, 'empty or duplicate sku' end
    if not qty or qty < 1 or qty ~= math.floor(qty) then return nil, 'bad quantity' end
    seen[sku] = true
    lines[i] = {sku = sku, qty = qty, channel = ARGV[j + 2],
      sale = KEYS[k + 2 * (i - 1)], buyers = KEYS[k + 1 + 2 * (i - 1)]}
  end
  return lines
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- check_lines judges every line and returns the refusal of the most
-- important kind and its SKUs (nil when all pass), or nil, nil, an error
-- for a sale state it cannot read. It notes each line's round, price and
-- released units for take_lines.
local rank = {no_sale = 4, not_active = 3, limit = 2, stock = 1}
local function check_lines(lines, user, now)
  local worst, failed = nil, {}
  local function fail(reason, sku)
    if not worst or rank[reason] > rank[worst] then worst, failed = reason, {} end
    if reason == worst then failed[#failed + 1] = sku end
  end
  for _, l in ipairs(lines) do
    local s = redis.call('HMGET', l.sale, 'round', 'available', 'limit', 'starts_ms', 'ends_ms', 'price_cents', 'released')
    if not s[1] then
      fail('no_sale', l.sku)
    else
      local round, avail, limit = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
      local starts, ends, price = tonumber(s[4]), tonumber(s[5]), tonumber(s[6])
      if not (round and avail and limit and starts and ends and price) then
        return nil, nil, 'unreadable sale state of ' .. l.sku
      end
      local bought = tonumber(redis.call('HGET', l.buyers, user) or '0')
      if now < starts or (ends > 0 and now >= ends) then
        fail('not_active', l.sku)
      elseif limit > 0 and bought + l.qty > limit then
        fail('limit', l.sku)
      elseif avail < l.qty then
        fail('stock', l.sku)
      end
      l.round, l.price, l.released, l.window = round, price, tonumber(s[7] or '0'), s[4] .. ' ' .. s[5]
    end
  end
  return worst, failed
end

local function refusal(worst, failed)
  local out = {'fail', worst}
  for _, sku in ipairs(failed) do out[#out + 1] = sku end
  return out
end

-- take_lines takes the stock and counts the buyer for lines that passed
-- check_lines, publishing what each leaves, and returns their items (the
-- order event's shape).
local function take_lines(lines, user)
  local items = {}
  for i, l in ipairs(lines) do
    local left = redis.call('HINCRBY', l.sale, 'available', -l.qty)
    redis.call('HINCRBY', l.buyers, user, l.qty)
    -- The saga runs only on a cluster, where the changes channels are
    -- sharded (inventory's PublishCommand): SPUBLISH, in the SKU's slot.
    if l.channel ~= '' then
      redis.call('SPUBLISH', l.channel, string.format('%d %d ', l.round, left) .. l.window)
    end
    local ttl = redis.call('PTTL', l.sale)
    if ttl > 0 then redis.call('PEXPIRE', l.buyers, ttl) end
    items[i] = {sku = l.sku, quantity = l.qty, price_cents = l.price, round_id = l.round, released = l.released}
  end
  return items
end
