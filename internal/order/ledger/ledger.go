// Package ledger is order's Redis state as an audit or a recovery reads
// and restores it: the keys of every partition, the status hashes, and
// the few writes a recovery makes through them.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/orderkey"
)

// Ledger reads and restores order's Redis state on one Redis or cluster.
type Ledger struct {
	rdb   redis.UniversalClient
	k     orderkey.Keys
	parts []StreamKeys // by partition
}

// SettledRetention is how long a settled log keeps an entry: far longer
// than an audit may take and than the masters' clocks may differ, for the
// audit's time fence (internal/audit's package doc).
const SettledRetention = 10 * time.Minute

// New returns the ledger of order's keys under prefix on rdb,
// partitioned as parts. rdb may be nil for a ledger asked only for key
// names (Partitions, Keys, HomeOf).
func New(rdb redis.UniversalClient, prefix string, parts keyspace.Partitions) *Ledger {
	k := orderkey.New(prefix, parts)
	out := make([]StreamKeys, parts.Count())
	pattern := k.StatusPattern()
	for p := range out {
		out[p] = StreamKeys{Partition: p, Stream: k.Stream(p), Group: order.StreamGroup, Dead: k.Dead(p), Due: k.Due(p),
			Holds: k.Holds(p), HoldPrefix: k.Hold(p, ""), Settled: k.Settled(p), Releases: k.Releases(p), StatusPattern: pattern, k: k}
	}
	return &Ledger{rdb: rdb, k: k, parts: out}
}

// Partitions returns the keys of every partition, in partition order (the
// ledger's own slice: callers do not modify it).
func (l *Ledger) Partitions() []StreamKeys { return l.parts }

// Keys returns the keys of partition p (partition 0 alone on a single
// Redis with the default layout).
func (l *Ledger) Keys(p int) StreamKeys { return l.parts[p] }

// StreamKeys are the order package's keys of one order partition that an
// audit or a recovery reads: the partition's stream and its group, its
// dead letters and due set, and (for every partition alike) the status
// hashes. Only Ledger's AdvanceStream and RestoreStatuses write through them.
type StreamKeys struct {
	// Partition is the partition's number (keyspace.Partitions).
	Partition           int
	Stream, Group, Dead string
	Due                 string
	// On a cluster, the lines held in this partition for orders homed
	// elsewhere: Holds indexes the hold records (order ids), HoldPrefix
	// and an order id name one; Settled is the settled log of the holds
	// dropped because their order committed (zset of {order_id, user,
	// items} by when, kept SettledRetention).
	Holds, HoldPrefix, Settled string
	// Releases is the releases log: a stream entry {order_id, skus} for
	// each release here of an order homed elsewhere that gave units back.
	Releases string
	// StatusPattern matches every order status hash (for SCAN, on every
	// master of a cluster); StatusKey names one, StatusID reads one's name.
	StatusPattern string
	k             orderkey.Keys
}

// StatusKey is the key of order id's status hash.
func (k StreamKeys) StatusKey(id string) string { return k.k.Status(id) }

// IdemKey is the key of user's idempotency record for the client's key.
func (k StreamKeys) IdemKey(user, key string) string { return k.k.Idem(user, key) }

// PendingKey is the key of user's pending index: the orders not yet
// persisted, which the writer takes them off.
func (k StreamKeys) PendingKey(user string) string { return k.k.Pending(user) }

// StatusID is the order id a status hash's key names (a key SCAN found
// with StatusPattern); ok is false for a key that names no order.
func (k StreamKeys) StatusID(key string) (id string, ok bool) {
	return k.k.StatusID(key)
}

// HomeOf is the home partition (where its events go) of order id with
// lines of skus, and whether that is certain. On a cluster the id names it
// (keyspace's Stamp). On a single Redis an order's home is its first
// line's partition as it was placed, which PostgreSQL does not keep (its
// lines are keyed by SKU), so only an order whose lines all fall in one
// partition is certain from its SKUs; the status hash knows the home of
// the others (StatusHash.Home). Else the answer is the partition of the
// first SKU given, a right home on a single Redis, where any partition's
// stream and due set reach the writers and sweepers.
func (l *Ledger) HomeOf(id string, skus []string) (home int, certain bool) {
	return homeOf(l.k.Parts(), id, skus)
}

// homeOf is HomeOf for callers holding keys, not a Ledger (restoreStatus).
func homeOf(parts keyspace.Partitions, id string, skus []string) (home int, certain bool) {
	if parts.Grouped() {
		return parts.Home(id), true
	}
	if len(skus) == 0 {
		return 0, parts.Count() == 1
	}
	home = parts.Of(skus[0])
	for _, s := range skus[1:] {
		if parts.Of(s) != home {
			return home, false
		}
	}
	return home, true
}

// StatusHash is an order's status hash as HGETALL reads it.
type StatusHash map[string]string

// Live reads the hash's status and creation time (Unix ms).
func (m StatusHash) Live() (status string, createdMS int64) {
	return m["status"], order.MillisTime(m["created_ms"]).UnixMilli()
}

// Home reads the hash's home partition (no field: partition 0, which
// reserve does not write, or an order of before partitions); ok is false
// for an empty hash (no such order).
func (m StatusHash) Home() (partition int, ok bool) {
	if len(m) == 0 {
		return 0, false
	}
	p, _ := strconv.Atoi(m["partition"])
	return p, true
}

// advanceScript moves the order stream's last generated id up to ARGV[2] if it
// is below (XSETID), creating the stream and the writers' group first when
// a failover lost them. KEYS[1] the stream; ARGV[1] the group, ARGV[2] the
// id. Returns the stream's last id afterwards.
var advanceScript = redis.NewScript(`
local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local wm, ws = parts(ARGV[2])
if not wm then return redis.error_reply('ERR advance: bad id ' .. ARGV[2]) end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
end
local last = '0-0'
local info = redis.call('XINFO', 'STREAM', KEYS[1])
for j = 1, #info, 2 do
  if info[j] == 'last-generated-id' then last = info[j + 1] end
end
local lm, ls = parts(last)
if wm > lm or (wm == lm and ws > ls) then
  redis.call('XSETID', KEYS[1], ARGV[2])
  return ARGV[2]
end
return last`)

// AdvanceStream makes the last generated id of partition k's order stream
// at least id (a stream id PostgreSQL recorded): after a failover the
// promoted replica may lack the newest entries, already written, and an
// audit cuts PostgreSQL at the stream's last id (rows of later entries
// are taken for orders accepted after its snapshot). New entries are
// numbered past id anyway, since ids follow the clock; this only closes
// the gap until one comes. It returns the stream's last id.
func (l *Ledger) AdvanceStream(ctx context.Context, k StreamKeys, id string) (string, error) {
	last, err := advanceScript.Run(ctx, l.rdb, []string{k.Stream}, k.Group, id).Text()
	if err != nil {
		return "", fmt.Errorf("advance the order stream %s to %s: %w", k.Stream, id, err)
	}
	return last, nil
}

// Confirmed is an order PostgreSQL holds with no final state: its buyer
// may still pay or cancel it, and it expires at ExpiresAt (zero: never).
type Confirmed struct {
	OrderID, UserID string
	TotalCents      int64
	CreatedAt       time.Time
	ExpiresAt       time.Time
	Items           []order.ReservedItem
}

// restoreStatusScript writes a confirmed order's status hash unless one
// exists (whatever it says: a live status is never overwritten), but for
// the saga's tombstone 'aborted': PostgreSQL has the order, so it did
// commit, and a repair that swept before recover saw no status and wrote
// the tombstone; the order's status is restored over it.
// KEYS[1] the status hash; ARGV: user id, items JSON, total cents,
// created ms, expires ms, TTL ms, the home partition, the status to
// write ('confirmed', or the final state PostgreSQL recorded). Returns 1
// when written.
var restoreStatusScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if redis.call('EXISTS', KEYS[1]) == 1 and st ~= 'aborted' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'user_id', ARGV[1], 'status', ARGV[8], 'items', ARGV[2],
  'total_cents', ARGV[3], 'created_ms', ARGV[4], 'expires_ms', ARGV[5], 'partition', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1`)

// RestoreStatuses gives back their Redis status to confirmed orders whose
// status a failover lost: every lifecycle step (pay, cancel, the expiry
// sweeper) goes by it, and without it the order could neither be paid nor
// cancelled, nor expire, and would hold its units for good. An order with
// a status hash is left as it is; an order with a payment window goes back
// in the due set (ZADD NX: an entry in place is kept), so the sweeper
// expires it once its time is past. It returns how many statuses it
// wrote; callers pass only the orders whose status they found missing
// (StatusKey), since each is a round trip. The status and the due set are
// separate steps, each idempotent, so they never need one slot. The
// status names the order's home partition (Ledger.HomeOf), whose due set
// gets its payment due time and whose stream its transitions.
func (l *Ledger) RestoreStatuses(ctx context.Context, orders []Confirmed) (int, error) {
	n := 0
	for _, o := range orders {
		wrote, err := restoreStatus(ctx, l.rdb, l.k, o, "confirmed")
		if err != nil {
			return n, err
		}
		if wrote {
			n++
		}
	}
	return n, nil
}

// RestoreStatus writes order o's status hash as state ("confirmed", or
// the final state PostgreSQL recorded), over the saga's tombstone but no
// other status, and for a confirmed order with a payment window its due
// entry. It reports whether it wrote the status.
func (l *Ledger) RestoreStatus(ctx context.Context, o Confirmed, state string) (bool, error) {
	return restoreStatus(ctx, l.rdb, l.k, o, state)
}

// restoreStatus writes order o's status hash as state (restoreStatusScript)
// and, for a confirmed order with a payment window, its due entry.
func restoreStatus(ctx context.Context, rdb redis.UniversalClient, k orderkey.Keys, o Confirmed, state string) (bool, error) {
	items, err := json.Marshal(o.Items)
	if err != nil {
		return false, fmt.Errorf("restore the status of order %s: %w", o.OrderID, err)
	}
	// The hash lives as a new order's does: a week, and at least a day
	// past its payment window (which may be longer than a week).
	var expires int64
	ttl := order.StatusTTL
	if !o.ExpiresAt.IsZero() {
		expires = o.ExpiresAt.UnixMilli()
		ttl = max(ttl, time.Until(o.ExpiresAt)+24*time.Hour)
	}
	home, _ := homeOf(k.Parts(), o.OrderID, skusOf(o.Items))
	wrote, err := restoreStatusScript.Run(ctx, rdb, []string{k.Status(o.OrderID)}, o.UserID, string(items),
		o.TotalCents, o.CreatedAt.UnixMilli(), expires, ttl.Milliseconds(), home, state).Int()
	if err != nil {
		return false, fmt.Errorf("restore the status of order %s: %w", o.OrderID, err)
	}
	if expires > 0 && state == "confirmed" { // an entry for an order no longer due is dropped by the sweeper
		if err := rdb.ZAddNX(ctx, k.Due(home), redis.Z{Score: float64(expires), Member: o.OrderID}).Err(); err != nil {
			return wrote == 1, fmt.Errorf("restore the payment due time of order %s: %w", o.OrderID, err)
		}
	}
	return wrote == 1, nil
}

func skusOf(items []order.ReservedItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SKU
	}
	return out
}

// PersistedOrder is an order as PostgreSQL holds it: the order and its
// items, and State, its final state if one was recorded ('paid',
// 'cancelled', 'expired' or 'refunded'), else "confirmed".
type PersistedOrder struct {
	Confirmed
	State string
}

// PersistedIn reads order id from db (nil when it has no such order), for
// the saga repair (internal/order/saga). The SQL is this package's: it
// owns the orders tables.
func PersistedIn(db *pgxpool.Pool) func(context.Context, string) (*PersistedOrder, error) {
	return func(ctx context.Context, id string) (*PersistedOrder, error) {
		rows, err := db.Query(ctx, `
SELECT o.user_id::text, o.total_cents, o.created_at, o.expires_at, coalesce(t.status, 'confirmed'),
       i.sku, i.quantity, i.price_cents, i.round_id
FROM orders o LEFT JOIN order_items i ON i.order_id = o.id
LEFT JOIN order_transitions t ON t.order_id = o.id
WHERE o.id = $1::uuid`, id)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var o *PersistedOrder
		for rows.Next() {
			var rec PersistedOrder
			var expires *time.Time
			var sku *string
			var qty *int
			var price, round *int64
			if err := rows.Scan(&rec.UserID, &rec.TotalCents, &rec.CreatedAt, &expires, &rec.State,
				&sku, &qty, &price, &round); err != nil {
				return nil, err
			}
			if o == nil {
				rec.OrderID = id
				if expires != nil {
					rec.ExpiresAt = *expires
				}
				o = &rec
			}
			if sku != nil && qty != nil && price != nil && round != nil {
				o.Items = append(o.Items, order.ReservedItem{SKU: *sku, Quantity: *qty, PriceCents: *price, RoundID: *round})
			}
		}
		return o, rows.Err()
	}
}

// Restorer restores the Redis status of written order id as PostgreSQL
// records its state (order's Options.Restore: the refund of a paid order
// whose status Redis forgot).
func (l *Ledger) Restorer(db *pgxpool.Pool) func(context.Context, string) error {
	persisted := PersistedIn(db)
	return func(ctx context.Context, id string) error {
		o, err := persisted(ctx, id)
		if err == nil && o == nil {
			err = errors.New("not in PostgreSQL")
		}
		if err != nil {
			return fmt.Errorf("restore the status of order %s: %w", id, err)
		}
		_, err = l.RestoreStatus(ctx, o.Confirmed, o.State)
		return err
	}
}
