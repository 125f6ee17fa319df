-- Reserve-and-enqueue: the whole purchase decision in one atomic step, on
-- a single Redis. Go prepends a shebang line and lines.lua (reserve.go):
-- the shebang makes Redis check memory before the script starts, so under
-- maxmemory the script is refused whole instead of failing midway.
--
-- For every line: is the sale open, does the buyer hold a pass of its
-- waiting room (a round with one), is the buyer within the per-user limit,
-- is there stock? Only when every line passes: take the stock, count the
-- buyer, XADD one order event with every line (price and round read here,
-- at this moment), store the pending status, index it for the buyer, and
-- record the idempotency key. All reads and checks come before the first
-- write: a script that fails midway keeps its earlier writes.
--
-- Whose keys: KEYS[1..4] and KEYS[6] are this package's (order); KEYS[5] is the cart
-- package's, handed in for a checkout: it is only read and deleted;
-- the sale keys are inventory's (its SaleKey and BuyersKey), read and
-- changed in the format inventory documents (internal/inventory/stock.go).
--
-- KEYS[1] order stream (the order's partition: its first SKU's)
-- KEYS[2] order status (hash)
-- KEYS[3] buyer's pending index (sorted set)
-- KEYS[4] idempotency record    (touched only when ARGV[5] ~= '')
-- KEYS[5] the buyer's cart      (touched only when ARGV[6] == '1': checkout)
-- KEYS[6] orders due for payment, the partition's (sorted set by
--         expires_ms; touched only when ARGV[7] > 0)
-- KEYS[7 + 3(i-1)]  sale state of line i (hash: round, available, limit,
--                   starts_ms, ends_ms, price_cents, released, room_rate)
-- KEYS[8 + 3(i-1)]  buyer counts of line i (hash: user id -> units)
-- KEYS[9 + 3(i-1)]  room passes of line i (room's; only read, and only
--                   when the sale has a room)
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] status TTL (ms)
-- ARGV[4] idempotency TTL (ms)
-- ARGV[5] the request's fingerprint, to record with the idempotency key
--         ('' for no key): a repeat of the key with another fingerprint is
--         another request, refused (idem_reused) and changing nothing
-- ARGV[6] '1' for a checkout: the cart must still hold exactly these lines,
--         and it is emptied with the reservation
-- ARGV[7] payment window (ms; 0: none): the order expires at created_ms +
--         this, fixed now, unless it is paid before
-- ARGV[8] the order's partition (kept in the status hash: its later
--         transition events go to the same stream)
-- ARGV[9] number of lines n, then ARGV[10 + 3(i-1)] sku, ARGV[11 + 3(i-1)] qty,
--         ARGV[12 + 3(i-1)] the SKU's changes channel (inventory's
--         ChangesChannel; '' for none): a reserved line publishes the stock
--         it leaves there, in inventory's format (changes.go), in this step
-- ARGV[10 + 3n] the caller's deadline in ms since the epoch (0: none): a
--         call that runs past it (it waited in a stalled Redis while the
--         buyer was answered 503) reserves nothing
-- ARGV[11 + 3n] the waiting room passes the buyer presented,
--         comma-separated ('' for none)
-- ARGV[12 + 3n] the purchase's W3C traceparent ('' for none; absent in
--         callers from before tracing)
--
-- Returns {'ok', items_json, total_cents, created_ms, expires_ms (0: none)}
--      or {'dup', order_id}         (idempotent repeat, or a second run)
--      or {'fail', reason, sku...}  reason: no_sale | not_active | pass |
--         limit | stock | cart_changed (the cart changed since it was read: retry) |
--         idem_reused (the key was used for a different request) |
--         late (the deadline passed: nothing was reserved) |
--         erased (the buyer was erased: see order.go's erasedMember)
-- The idempotency record is 'order_id fingerprint'.
local order_id, user = ARGV[1], ARGV[2]
local status_ttl, idem_ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local idem_fp, use_cart = ARGV[5], ARGV[6] == '1'
local use_idem = idem_fp ~= ''
local pay_ttl = tonumber(ARGV[7])
local partition = tonumber(ARGV[8])
local n = tonumber(ARGV[9])

local function bad(msg) return redis.error_reply('ERR reserve: ' .. msg) end
if order_id == '' or user == '' then return bad('empty order or user id') end
if not status_ttl or status_ttl < 1 or not idem_ttl or idem_ttl < 1 then return bad('bad ttl') end
if string.find(idem_fp, '%s') then return bad('bad fingerprint') end
if not pay_ttl or pay_ttl < 0 or pay_ttl ~= math.floor(pay_ttl) then return bad('bad payment window') end
if not partition or partition < 0 or partition ~= math.floor(partition) then return bad('bad partition') end
if not n or n < 1 or n ~= math.floor(n) or #KEYS ~= 6 + 3 * n or (#ARGV ~= 11 + 3 * n and #ARGV ~= 12 + 3 * n) then
  return bad('bad line count')
end

local lines, err = read_lines(n, 10, 7)
if not lines then return bad(err) end
local deadline = tonumber(ARGV[10 + 3 * n])
if not deadline or deadline < 0 then return bad('bad deadline') end
local passes = pass_set(ARGV[11 + 3 * n])

-- The order id is made before the script runs: a second run of the same
-- call (resent after its reply was lost, by any layer) finds the order's
-- status and buys nothing again, Idempotency-Key or not.
if redis.call('EXISTS', KEYS[2]) == 1 then return {'dup', order_id} end
if use_idem then
  local prev = redis.call('GET', KEYS[4])
  if prev then
    local id, fp = string.match(prev, '^(%S+) (%S+)$')
    if not id then return {'dup', prev} end -- a record made before fingerprints
    if fp ~= idem_fp then return {'fail', 'idem_reused'} end
    return {'dup', id}
  end
end

-- A checkout reserves what the cart held when it was read; if the buyer
-- changed the cart since, the caller reads it again.
if use_cart then
  local want = {}
  for _, l in ipairs(lines) do want[l.sku] = l.qty end
  local cart = redis.call('HGETALL', KEYS[5])
  if #cart ~= 2 * n then return {'fail', 'cart_changed'} end
  -- n distinct fields, each a line's SKU with the line's quantity: the
  -- cart is exactly the lines.
  for i = 1, #cart, 2 do
    if tonumber(cart[i + 1]) ~= want[cart[i]] then return {'fail', 'cart_changed'} end
  end
end

-- A buyer erased since their check passed (it may have run up front, not
-- in this script) buys nothing: the erasure has read their orders.
if redis.call('ZSCORE', KEYS[3], '~erased') then return {'fail', 'erased'} end

local now = now_ms()
-- After the repeat checks (a repeat tells the truth even late), before
-- any write: the caller has answered 503 by now.
if deadline > 0 and now > deadline then return {'fail', 'late'} end
local worst, failed, unreadable = check_lines(lines, user, now, passes)
if unreadable then return bad(unreadable) end
if worst then return refusal(worst, failed) end

-- Every check passed: write.
local placed = append_order(KEYS[1], KEYS[2], KEYS[6],
  {order_id = order_id, user = user, partition = ARGV[8], now = now,
   pay_ttl = pay_ttl, status_ttl = status_ttl, trace = ARGV[12 + 3 * n] or ''},
  take_lines(lines, user, 'PUBLISH'), {})
redis.call('ZADD', KEYS[3], now, order_id)
redis.call('PEXPIRE', KEYS[3], status_ttl)
if use_idem then
  redis.call('SET', KEYS[4], order_id .. ' ' .. idem_fp, 'PX', idem_ttl)
end
if use_cart then
  redis.call('DEL', KEYS[5])
end
return placed
