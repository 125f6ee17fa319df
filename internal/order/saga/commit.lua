-- Commit: the saga's single commit point, on the order's home partition
-- (Redis Cluster only; lines.lua is prepended). It takes the home's
-- own lines as reserve.lua would, then appends the whole order event, the
-- pending status and the due entry, all in the home's slot. The other
-- partitions' lines were taken by hold.lua; their items come in ARGV.
-- A status tombstoned 'aborted' by the repair (repair.go) refuses the
-- commit: the holds were, or are being, given back.
--
-- KEYS[1] the home's order stream   KEYS[2] order status (hash)
-- KEYS[3] the home's due set (touched only when ARGV[4] > 0)
-- KEYS[4 + 3(j-1)] sale state of the j-th home line, KEYS[5 + 3(j-1)] its
--         buyer counts, KEYS[6 + 3(j-1)] its room passes
-- ARGV[1] order id   ARGV[2] user id   ARGV[3] status TTL (ms)
-- ARGV[4] payment window (ms; 0: none)   ARGV[5] the home partition
-- ARGV[6] the attempt (kept in the status: the repair drops only its holds)
-- ARGV[7] 'commit', or 'check' (judge the home lines only)
-- ARGV[8] number of lines n, then per line, in the order's line order:
--         sku, qty, changes channel, and the held item's JSON ('' for a
--         home line, whose keys are the next three KEYS)
-- ARGV[9 + 4n] the waiting room passes the buyer presented,
--         comma-separated ('' for none)
-- ARGV[10 + 4n] the purchase's W3C traceparent ('' for none; may be absent)
--
-- Returns {'ok', items_json, total_cents, created_ms, expires_ms} (also
--         for a resent commit of the same attempt: the status's answer)
--      or {'dup', order_id}: another attempt of this order committed
--      or {'aborted'}: the repair undid this order
--      or {'busy'}: the repair is deciding this order (it asks PostgreSQL
--         whether a failover lost its status): no commit now; retry
--      or {'fail', reason, sku...} as reserve.lua ({'ok'} in check mode)
local order_id, user = ARGV[1], ARGV[2]
local status_ttl, pay_ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local attempt, mode, n = ARGV[6], ARGV[7], tonumber(ARGV[8])

local function bad(msg) return redis.error_reply('ERR commit: ' .. msg) end
if order_id == '' or user == '' or attempt == '' then return bad('empty order, user or attempt') end
if mode ~= 'commit' and mode ~= 'check' then return bad('bad mode') end
if not status_ttl or status_ttl < 1 then return bad('bad ttl') end
if not pay_ttl or pay_ttl < 0 or pay_ttl ~= math.floor(pay_ttl) then return bad('bad payment window') end
if not tonumber(ARGV[5]) then return bad('bad partition') end
if not n or n < 1 or n ~= math.floor(n) or (#ARGV ~= 9 + 4 * n and #ARGV ~= 10 + 4 * n) then return bad('bad line count') end
local passes = pass_set(ARGV[9 + 4 * n])

-- Every line in order; the home's are read from KEYS, the others' items
-- from their holds.
local all, home, seen = {}, {}, {}
for i = 1, n do
  local j = 9 + 4 * (i - 1)
  local sku, qty, held = ARGV[j], tonumber(ARGV[j + 1]), ARGV[j + 3]
  if sku == '' or seen[sku] then return bad('empty or duplicate sku') end
  if not qty or qty < 1 or qty ~= math.floor(qty) then return bad('bad quantity') end
  seen[sku] = true
  if held == '' then
    local k = 4 + 3 * #home
    local l = {sku = sku, qty = qty, channel = ARGV[j + 2], sale = KEYS[k], buyers = KEYS[k + 1],
      passes = KEYS[k + 2]}
    home[#home + 1] = l
    all[i] = l
  else
    local it = cjson.decode(held)
    if it.sku ~= sku or it.quantity ~= qty then return bad('held item does not match its line') end
    all[i] = {item = it}
  end
end
if #KEYS ~= 3 + 3 * #home then return bad('bad key count') end

-- The order's status first, in both modes: a run refused on its holds
-- (check mode) may be the repeat of a run that committed meanwhile (the
-- same Idempotency-Key; its hold counted the buyer, or took the last
-- units), and then the answer is that order, not the refusal.
local st = redis.call('HMGET', KEYS[2], 'status', 'attempt', 'items', 'total_cents', 'created_ms', 'expires_ms')
if st[1] == 'aborted' then
  if redis.call('HEXISTS', KEYS[2], 'deciding') == 1 then return {'busy'} end
  return {'aborted'}
end
if st[1] and st[2] == attempt and mode == 'commit' then return {'ok', st[3], st[4], st[5], st[6]} end
if st[1] or redis.call('EXISTS', KEYS[2]) == 1 then return {'dup', order_id} end

local now = now_ms()
local worst, failed, unreadable = check_lines(home, user, now, passes)
if unreadable then return bad(unreadable) end
if worst then return refusal(worst, failed) end
if mode == 'check' then return {'ok'} end

local taken, items, h = take_lines(home, user, 'SPUBLISH'), {}, 0
for i, l in ipairs(all) do
  local it = l.item
  if not it then
    h = h + 1
    it = taken[h]
  end
  items[i] = it
end
return append_order(KEYS[1], KEYS[2], KEYS[3],
  {order_id = order_id, user = user, partition = ARGV[5], now = now,
   pay_ttl = pay_ttl, status_ttl = status_ttl, trace = ARGV[10 + 4 * n] or ''},
  items, {'attempt', attempt})
