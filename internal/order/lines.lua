-- The reservation rule, shared by every script that takes stock for an
-- order: reserve.lua (a single Redis: the whole order in one step), and
-- the saga's hold.lua and commit.lua (a Redis Cluster: one partition's
-- lines per step). Go prepends this file to each (reserve.go,
-- sagascripts.go), so a line is judged, and refusals are ranked, the same
-- way whichever script runs: a cross-shard checkout is refused exactly as
-- on a single Redis.
--
-- read_lines reads n lines: ARGV[a + 3(i-1)] sku, qty, changes channel;
-- KEYS[k + 3(i-1)] sale state, buyer counts (inventory's keys and format),
-- and the round's room passes (room's Keys.Passes: user id -> 'round pass
-- expires_ms admitted_ms'; read only when the sale has a room).
-- It returns nil and a message for a malformed line.
local function read_lines(n, a, k)
  local lines, seen = {}, {}
  for i = 1, n do
    local j, kk = a + 3 * (i - 1), k + 3 * (i - 1)
    local sku, qty = ARGV[j], tonumber(ARGV[j + 1])
    if not sku or sku == '' or seen[sku] then return nil, 'empty or duplicate sku' end
    if not qty or qty < 1 or qty ~= math.floor(qty) then return nil, 'bad quantity' end
    seen[sku] = true
    lines[i] = {sku = sku, qty = qty, channel = ARGV[j + 2],
      sale = KEYS[kk], buyers = KEYS[kk + 1], passes = KEYS[kk + 2]}
  end
  return lines
end

-- pass_set is the set of the waiting room passes the buyer presented:
-- text is the ARGV of them, comma-separated ('' for none).
local function pass_set(text)
  local set = {}
  for p in string.gmatch(text or '', '[^,]+') do set[p] = true end
  return set
end

-- has_pass says whether user holds a live pass of round, the sale's
-- current one, among the presented passes (a pass_set): the field of an
-- older round's room is dead, and so is one past its expires_ms.
local function has_pass(key, user, round, passes, now)
  local v = redis.call('HGET', key, user)
  if not v then return false end
  local r, p, exp = string.match(v, '^(%S+) (%S+) (%S+)')
  exp = tonumber(exp)
  return tonumber(r) == round and passes[p] == true and exp ~= nil and now < exp
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- check_lines judges every line and returns the refusal of the most
-- important kind and its SKUs (nil when all pass), or nil, nil, an error
-- for a sale state it cannot read. A line of a round with a waiting room
-- (room_rate set) needs the buyer's pass among passes (a pass_set), else
-- it fails 'pass'. It notes each line's round, price and released units
-- for take_lines. It only reads: a script calls it before its first
-- write, for a script that fails midway keeps its earlier writes.
--
-- A line's sale hash may be one bucket of a round of several (inventory's
-- buckets.go, docs/design/buckets.md): it decides only for the shoppers
-- homed in it (else 'bucket': the caller named the wrong one), and a
-- line it is short of fails 'short', ranked as 'stock' (the caller may
-- move units in from the other buckets and ask again).
local rank = {bucket = 6, no_sale = 5, not_active = 4, pass = 3, limit = 2, stock = 1, short = 1}
local function check_lines(lines, user, now, passes)
  local worst, failed = nil, {}
  local function fail(reason, sku)
    if not worst or rank[reason] > rank[worst] then worst, failed = reason, {} end
    if rank[reason] == rank[worst] then
      failed[#failed + 1] = sku
      if reason == 'short' then worst = reason end -- some line may get units moved in
    end
  end
  for _, l in ipairs(lines) do
    local s = redis.call('HMGET', l.sale, 'round', 'available', 'limit', 'starts_ms', 'ends_ms', 'price_cents', 'released', 'room_rate',
      'buckets', 'bucket', 'round_released', 'released_in', 'draw')
    local buckets = tonumber(s[9] or '1')
    l.bucketed = buckets and buckets > 1
    l.buckets = buckets
    if not s[1] then
      fail('no_sale', l.sku)
    else
      -- A sale hash that cannot be read whole is refused before any
      -- write, as is a buyers key of the wrong type (the HGET below raises
      -- WRONGTYPE here, not in take_lines).
      local round, avail, limit = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
      local starts, ends, price = tonumber(s[4]), tonumber(s[5]), tonumber(s[6])
      if not (round and avail and limit and starts and ends and price) then
        return nil, nil, 'unreadable sale state of ' .. l.sku
      end
      local bought = tonumber(redis.call('HGET', l.buyers, user) or '0')
      if l.bucketed and tonumber(string.sub(redis.sha1hex(user), 1, 8), 16) % buckets ~= tonumber(s[10]) then
        fail('bucket', l.sku)
      elseif now < starts or (ends > 0 and now >= ends) or s[13] then
        -- A draw's units go to its entrants (internal/draw), never first
        -- come, first served.
        fail('not_active', l.sku)
      elseif s[8] and not has_pass(l.passes, user, round, passes, now) then
        fail('pass', l.sku)
      elseif limit > 0 and bought + l.qty > limit then
        fail('limit', l.sku)
      elseif avail < l.qty and l.bucketed then
        fail('short', l.sku)
      elseif avail < l.qty then
        fail('stock', l.sku)
      end
      l.round, l.price, l.released, l.window = round, price, tonumber(s[7] or '0'), s[4] .. ' ' .. s[5] .. ' ' .. (s[3] or '0')
      l.bucket_of = ''
      if l.bucketed then l.bucket_of = ' ' .. s[10] .. ' ' .. s[9] end
      -- A bucket's units may be ones another bucket was given back and
      -- moved here: the round's releases as the last move saw them (a
      -- single Redis), or those the moves brought (released_in, a
      -- cluster), are what PostgreSQL's CHECK must allow for.
      if l.bucketed then
        l.released = math.max(l.released, tonumber(s[11] or '0')) + tonumber(s[12] or '0')
      end
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
-- check_lines, publishing what each leaves with publish (inventory's
-- PublishCommand: PUBLISH on a single Redis, SPUBLISH in the SKU's slot
-- on a cluster), and returns their items (the order event's shape).
local function take_lines(lines, user, publish)
  local items = {}
  for i, l in ipairs(lines) do
    local left = redis.call('HINCRBY', l.sale, 'available', -l.qty)
    redis.call('HINCRBY', l.buyers, user, l.qty)
    -- A bucket's own available is not the SKU's: its message names the
    -- bucket, and readers read the round again (inventory's changes.go).
    if l.channel ~= '' then
      redis.call(publish, l.channel, string.format('%d %d ', l.round, left) .. l.window .. l.bucket_of)
    end
    -- The counts expire with the sale (its TTL is set once, when seeded or
    -- restored): once set, the two run down together, so only a count
    -- key that would expire first is written, not one per purchase.
    local ttl = redis.call('PTTL', l.sale)
    if ttl > 0 and redis.call('PTTL', l.buyers) < ttl then redis.call('PEXPIRE', l.buyers, ttl) end
    items[i] = {sku = l.sku, quantity = l.qty, price_cents = l.price, round_id = l.round}
    -- Absent reads as 0 everywhere (ReservedItem's omitempty): a round
    -- that gave nothing back costs the event and the status 13 bytes less.
    if l.released ~= 0 then items[i].released = l.released end
    if l.bucketed then items[i].buckets = l.buckets end
  end
  return items
end

-- append_order writes a placed order in its home partition's slot: the
-- order event on stream, the pending status (with the extra field pairs
-- in more) and, with a payment window, its entry in the due set. o holds
-- order_id, user, partition (text), now, pay_ttl and status_ttl (ms), and
-- trace: the purchase's W3C traceparent ('' when it is not traced), which
-- the event carries so that the writer's span links to the purchase.
-- It returns the placement's answer:
-- {'ok', items_json, total_cents, created_ms, expires_ms (0: none)}.
local function append_order(stream, status, due, o, items, more)
  local total = 0
  for _, it in ipairs(items) do total = total + it.quantity * it.price_cents end
  local items_json = cjson.encode(items)
  -- Numbers as integer text: Lua would print large ones as 1.2e+14.
  local total_s, now_s = string.format('%d', total), string.format('%d', o.now)
  local expires_s = '0'
  if o.pay_ttl > 0 then expires_s = string.format('%d', o.now + o.pay_ttl) end
  local fields = {'order_id', o.order_id, 'user_id', o.user, 'created_ms', now_s,
    'total_cents', total_s, 'items', items_json, 'expires_ms', expires_s}
  if o.trace ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'traceparent', o.trace
  end
  redis.call('XADD', stream, '*', unpack(fields))
  local extra = more
  -- No partition field reads as partition 0 (parseLive, the ledger: the
  -- orders of before partitions), so partition 0 need not write it.
  if o.partition ~= '0' then
    extra = {'partition', o.partition, unpack(more)}
  end
  redis.call('HSET', status, 'user_id', o.user, 'status', 'pending',
    'items', items_json, 'total_cents', total_s, 'created_ms', now_s, 'expires_ms', expires_s,
    unpack(extra))
  redis.call('PEXPIRE', status, o.status_ttl)
  if o.pay_ttl > 0 then
    redis.call('ZADD', due, o.now + o.pay_ttl, o.order_id)
  end
  return {'ok', items_json, total_s, now_s, expires_s}
end
