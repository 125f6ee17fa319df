package saga

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts of a purchase on a Redis Cluster (saga.go, repair.go). Each
// runs in one slot: the user's (claim, finish), an order partition's
// (hold, unhold, commit, abort). hold.lua and commit.lua take stock by
// order's rule (order.Kit's Script), so the Placer builds them.
var (
	//go:embed hold.lua
	holdLua string
	//go:embed commit.lua
	commitLua string
)

// claimScript claims an Idempotency-Key for an order id, in the user's
// slot, before the order is placed. KEYS[1] the idempotency record
// ('<order id> <fingerprint>'); ARGV[1] the request's fingerprint,
// ARGV[2] a new order id, ARGV[3] the record's TTL (ms), ARGV[4] an order
// id the record may name to be replaced by the new one (” for none: the
// repair aborted that order, so the key starts afresh).
// Returns {'new', id}: the new id was recorded; {'had', id}: the key was
// claimed before for the same request, by order id; {'reused'}: the key
// was used for another request.
var idemClaimScript = redis.NewScript(`
local prev = redis.call('GET', KEYS[1])
if prev then
  local id, fp = string.match(prev, '^(%S+) (%S+)$')
  if not id then return {'had', prev} end -- a record made before fingerprints
  if fp ~= ARGV[1] then return {'reused'} end
  if id ~= ARGV[4] then return {'had', id} end
end
redis.call('SET', KEYS[1], ARGV[2] .. ' ' .. ARGV[1], 'PX', ARGV[3])
return {'new', ARGV[2]}`)

// finishLua does a committed order's part in the user's slot: indexes
// it as pending for its buyer and, for a checkout, removes from the cart
// every line that still holds the quantity bought (a line changed since
// the cart was read stays). KEYS[1] the buyer's pending index, KEYS[2] the
// cart (touched only when n > 0), KEYS[3] (only with an Idempotency-Key)
// the key's finish mark, set to the order id: a repeat that finds it
// unset finishes again (refinish); ARGV[1] order id, ARGV[2] created_ms,
// ARGV[3] the index's and the mark's TTL (ms), ARGV[4] n, then n sku,
// quantity pairs. Returns 1, or 0 when the buyer was erased meanwhile
// (order.Kit's Erased, which replaces %s): nothing is done, and the order
// is for the caller to cancel.
const finishLua = `
if redis.call('ZSCORE', KEYS[1], '%s') then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if KEYS[3] then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3]) end
for i = 5, #ARGV, 2 do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return 1`

// unholdScript ends a hold, once, by its record: 'drop' (the order committed:
// the units are the order's now) or 'release' (it did not: every line whose
// round is still live gives its units back and comes off the buyer's count;
// nothing counts as released, for no order sold them).
// More in docs/design/order.md ("saga/scripts.go").
var unholdScript = redis.NewScript(`
local rec = redis.call('HMGET', KEYS[1], 'attempt', 'user', 'items')
if rec[1] ~= ARGV[2] then return -1 end
local items = cjson.decode(rec[3])
if #KEYS ~= 3 + 2 * #items or #ARGV ~= 4 + 2 * #items then
  return redis.error_reply('ERR unhold: keys do not match the record')
end
local units = 0
if ARGV[3] == 'release' then
  for i, it in ipairs(items) do
    if ARGV[2 + 2 * i] ~= it.sku then return redis.error_reply('ERR unhold: sku order') end
  end
  for i, it in ipairs(items) do
    local sale, buyers, channel = KEYS[1 + 2 * i], KEYS[2 + 2 * i], ARGV[3 + 2 * i]
    if tonumber(redis.call('HGET', sale, 'round') or '0') == it.round_id then
      local left = redis.call('HINCRBY', sale, 'available', it.quantity)
      if redis.call('HINCRBY', buyers, rec[2], -it.quantity) <= 0 then
        redis.call('HDEL', buyers, rec[2])
      end
      units = units + it.quantity
      if channel ~= '' then -- sharded on a cluster, as in lines.lua's take_lines
        local w = redis.call('HMGET', sale, 'starts_ms', 'ends_ms', 'limit', 'bucket', 'buckets')
        local msg = string.format('%d %d %s %s', it.round_id, left, w[1], w[2])
        -- One bucket's available is not the round's: say whose it is.
        if w[5] then msg = msg .. string.format(' %s %s %s', w[3] or '0', w[4] or '0', w[5]) end
        redis.call('SPUBLISH', channel, msg)
      end
    end
  end
elseif ARGV[3] == 'drop' then
  local log, keep = KEYS[#KEYS], tonumber(ARGV[#ARGV])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('(%d', now - keep))
  redis.call('ZADD', log, string.format('%d', now),
    cjson.encode({order_id = ARGV[1], user = rec[2], items = items}))
  redis.call('PEXPIRE', log, keep)
else
  return redis.error_reply('ERR unhold: bad mode')
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return units`)

// abortScript decides a stale saga on its home, once: a status other than
// the tombstone means the order committed (its attempt is returned, so
// only that attempt's holds are kept, and its items, for a status recover
// wrote back from PostgreSQL, which names no attempt); no status means
// it did not, or a failover lost the status of one that did, and from
// now on no commit can happen: the tombstone 'aborted' (with ARGV[1] ms
// to live) refuses a late commit. Which of the two is for PostgreSQL to
// tell, asked after this (repair.go); with ARGV[2] = '1' the tombstone
// is marked 'deciding' until then (endDecisionScript), and a commit or a
// repeat of the order's Idempotency-Key meeting the mark is told to retry
// (the order may be a written one), not that the order is aborted.
// KEYS[1] the order status. Returns {'committed', attempt, items} or
// {'aborted'}.
var abortScript = redis.NewScript(`
local st = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'items')
if st[1] == 'aborted' then return {'aborted'} end
if st[1] or redis.call('EXISTS', KEYS[1]) == 1 then return {'committed', st[2] or '', st[3] or ''} end
redis.call('HSET', KEYS[1], 'status', 'aborted')
if ARGV[2] == '1' then redis.call('HSET', KEYS[1], 'deciding', '1') end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {'aborted'}`)

// endDecisionScript makes a tombstone final once PostgreSQL has answered
// that it has no such order: the mark 'deciding' goes. (An order
// PostgreSQL has gets its status back over the tombstone instead:
// ledger.Ledger's RestoreStatus.) Any other status is left alone. KEYS[1] the order
// status.
var endDecisionScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'status') ~= 'aborted' then return 0 end
return redis.call('HDEL', KEYS[1], 'deciding')`)
