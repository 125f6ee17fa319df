package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
)

// The repair of sagas a crash left between hold and commit (Redis Cluster
// only; see saga.go).
// More in docs/design/order.md ("repair.go").

// settled is partition p's settled log: the holds dropped because their
// order committed, each an entry {order_id, user, items} scored by when
// (Redis's ms), kept SettledRetention. It is the audit's record, in p's
// slot, that those units are an order's (internal/audit: a line held
// outside its order's home is accounted from its own partition only).
func (k keys) settled(p int) string { return k.partition(p) + ":settled" }

// releases is partition p's releases log: a stream entry {order_id, skus}
// for each release in p of an order homed elsewhere that gave units back,
// added in the release's step (inventory's outbox, WhenGiven), so its ids
// order those releases by p's clock. The audit reads the entries after
// its snapshot to tell the members of p's released sets that joined after
// it (internal/audit); the writer's housekeeping trims entries older than
// SettledRetention.
func (k keys) releases(p int) string { return k.partition(p) + ":releases" }

// SettledRetention is how long a settled log keeps an entry: far longer
// than an audit may take and than the masters' clocks may differ, for the
// audit's time fence (internal/audit's package doc).
const SettledRetention = 10 * time.Minute

// repairSagas settles every partition's stale holds; it returns the
// number settled and the first Redis error.
func (s *Sweeper) repairSagas(ctx context.Context) (int, error) {
	if !s.life.keys.parts.Grouped() {
		return 0, nil
	}
	settled := 0
	for p := range s.life.keys.parts.Count() {
		n, err := s.repairPartition(ctx, p)
		settled += n
		if err != nil {
			return settled, err
		}
	}
	return settled, nil
}

func (s *Sweeper) repairPartition(ctx context.Context, p int) (int, error) {
	settled := 0
	for {
		cctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
		reply, err := claimScript.Run(cctx, s.life.rdb, []string{s.life.keys.holds(p)}, s.o.Batch, s.o.Lease.Milliseconds()).StringSlice()
		cancel()
		if err != nil || len(reply) < 2 {
			return settled, fmt.Errorf("claim stale holds of partition %d: %w", p, err)
		}
		n, err := claimed(ctx, "order sweeper: settle stale holds", p, reply[2:], func(ctx context.Context, id string) (bool, error) {
			return true, s.settleHold(ctx, p, id)
		})
		settled += n
		if err != nil {
			return settled, err
		}
		if len(reply)-2 < s.o.Batch {
			return settled, nil
		}
	}
}

// settleHold finishes or undoes the saga of order id, whose hold on
// partition p is past its deadline.
func (s *Sweeper) settleHold(ctx context.Context, p int, id string) error {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	l := s.life
	rec, err := l.rdb.HMGet(ctx, l.keys.hold(p, id), "attempt", "items").Result()
	if err != nil {
		return fmt.Errorf("read hold %s: %w", id, err)
	}
	attempt, _ := rec[0].(string)
	raw, _ := rec[1].(string)
	var items []ReservedItem
	if attempt == "" || json.Unmarshal([]byte(raw), &items) != nil || len(items) == 0 {
		// Settled meanwhile (the record is gone) or not a record this
		// package wrote: only the index entry is left to drop.
		return l.rdb.ZRem(ctx, l.keys.holds(p), id).Err()
	}
	mode, err := s.decideHold(ctx, id, attempt, items)
	if err != nil {
		return err
	}
	n, err := unholdOn(ctx, l.rdb, l.keys, l.stock, l.stock.ChangesChannel, p, id, attempt, mode, items)
	if err != nil {
		return fmt.Errorf("settle hold %s: %w", id, err)
	}
	s.log.Info("settled a stale order hold", "order", id, "partition", p, "outcome", mode, "units", max(n, 0))
	return nil
}

// decideHold decides on the order's home whether the hold of attempt on
// order id, holding items, is the order's ("drop") or no order's
// ("release").
func (s *Sweeper) decideHold(ctx context.Context, id, attempt string, items []ReservedItem) (string, error) {
	mark := 0 // PostgreSQL is asked after the tombstone: mark it deciding till then
	if s.o.Persisted != nil {
		mark = 1
	}
	decision, err := abortScript.Run(ctx, s.life.rdb, []string{s.life.keys.status(id)}, abortedTTL.Milliseconds(), mark).StringSlice()
	switch {
	case err != nil || len(decision) == 0:
		return "", fmt.Errorf("decide the saga of order %s: %w", id, err)
	case decision[0] == "aborted":
		return s.decideTombstoned(ctx, id, items)
	case len(decision) != 3:
		return "", fmt.Errorf("decide the saga of order %s: unexpected reply %q", id, decision)
	case decision[1] == attempt:
		return "drop", nil // the committing attempt's hold
	case decision[1] == "":
		// A status recover wrote back from PostgreSQL after a failover lost
		// it: the order committed, by an attempt it does not name, and its
		// units stay taken (recover rebuilt the stock from PostgreSQL).
		// The hold is that attempt's when the order has its items; another
		// attempt's (a repeat of the Idempotency-Key reuses the id) took
		// units no order has, and gives them back.
		var ordered []ReservedItem
		if json.Unmarshal([]byte(decision[2]), &ordered) != nil || len(ordered) == 0 {
			return "drop", nil // not recover's record: committed, items unknown
		}
		return dropIf(holdsItemsOf(ordered, items)), nil
	}
	return "release", nil // another attempt committed the order
}

// decideTombstoned decides the hold of order id, holding items, whose
// status is the tombstone: from now on no attempt can commit it, so
// PostgreSQL, asked now (SweeperOptions.Persisted), tells for good whether
// one did before (a failover lost its status). An order PostgreSQL has is
// not aborted: its status, from PostgreSQL, replaces the tombstone (as
// recover writes it), and its hold is dropped when the order has its items (the committing
// attempt's), else given back (another attempt's, of a repeat). An order
// PostgreSQL does not have keeps its tombstone, now final, and its hold
// goes back. Either ends the decision before the hold is settled, so a
// crash in between leaves no mark behind a settled hold: the next repair
// of the hold decides again. With no Persisted check the tombstone alone
// decides: back.
func (s *Sweeper) decideTombstoned(ctx context.Context, id string, items []ReservedItem) (string, error) {
	if s.o.Persisted == nil {
		return "release", nil
	}
	o, err := s.o.Persisted(ctx, id)
	if err != nil {
		// The mark stays until the hold's claim lease runs out and the
		// next sweep asks again: a repeat is told to retry meanwhile.
		return "", fmt.Errorf("is order %s in PostgreSQL: %w", id, err)
	}
	if o == nil {
		if err := endDecisionScript.Run(ctx, s.life.rdb, []string{s.life.keys.status(id)}).Err(); err != nil {
			return "", fmt.Errorf("end the decision on order %s: %w", id, err)
		}
		return "release", nil
	}
	// The order's status goes back over the tombstone and its mark, as
	// recover writes it: deleting the tombstone instead would leave the id
	// with no status, and a repeat of its Idempotency-Key would then run
	// the order again under the same id, taking its units a second time
	// for an event the writer ignores.
	if _, err := restoreStatus(ctx, s.life.rdb, s.life.keys, o.Confirmed, o.State); err != nil {
		return "", fmt.Errorf("end the decision on order %s: %w", id, err)
	}
	return dropIf(holdsItemsOf(o.Items, items)), nil
}

// holdsItemsOf reports whether the order's items include every item of a
// hold: the same SKU, quantity and round.
func holdsItemsOf(ordered, held []ReservedItem) bool {
	for _, h := range held {
		if !slices.ContainsFunc(ordered, func(o ReservedItem) bool {
			return o.SKU == h.SKU && o.Quantity == h.Quantity && o.RoundID == h.RoundID
		}) {
			return false
		}
	}
	return true
}

func dropIf(ours bool) string {
	if ours {
		return "drop"
	}
	return "release"
}

// PersistedOrder is an order as PostgreSQL holds it: the order and its
// items, and State, its final state if one was recorded ('paid',
// 'cancelled' or 'expired'), else "confirmed".
type PersistedOrder struct {
	Confirmed
	State string
}

// PersistedIn is a SweeperOptions.Persisted that reads order id from db
// (nil when it has no such order). The SQL is this package's: it owns the
// orders tables.
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
				o.Items = append(o.Items, ReservedItem{SKU: *sku, Quantity: *qty, PriceCents: *price, RoundID: *round})
			}
		}
		return o, rows.Err()
	}
}

// unholdOn runs unholdScript (mode "drop" or "release") on the hold of
// order id on partition p, whose record holds items in this order; it
// returns the units given back, -1 when attempt holds nothing there.
func unholdOn(ctx context.Context, rdb redis.Scripter, k keys, stock *inventory.Stock, channel func(string) string,
	p int, id, attempt, mode string, items []ReservedItem) (int64, error) {
	keys := []string{k.hold(p, id), k.holds(p)}
	args := []any{id, attempt, mode}
	for _, it := range items {
		keys = append(keys, stock.SaleKey(it.SKU), stock.BuyersKey(it.SKU))
		args = append(args, it.SKU, channel(it.SKU))
	}
	keys = append(keys, k.settled(p))
	args = append(args, SettledRetention.Milliseconds())
	n, err := unholdScript.Run(ctx, rdb, keys, args...).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%s hold of order %s on partition %d: %w", mode, id, p, err)
	}
	return n, nil
}
