package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/sweeper"
)

// The repair of sagas a crash left between hold and commit.
// More in docs/design/order.md ("saga/repair.go").

// RepairOptions are the optional parts of a Repair.
type RepairOptions struct {
	// Persisted, when set, reads an order from PostgreSQL (nil: it has
	// no such order; see ledger.PersistedIn). The repair asks it before it
	// gives back the hold of an order whose status is gone (a failover
	// lost it): an order PostgreSQL has gets its status back, and keeps
	// the hold's units only when it has the hold's items (an order id is
	// reused by a repeat of its Idempotency-Key, whose attempt may hold
	// other lines).
	Persisted func(ctx context.Context, orderID string) (*ledger.PersistedOrder, error)
}

// Repair settles the holds whose saga a crash stopped between hold and
// commit, once past their deadline: the order sweeper runs it in every
// sweep (sweeper.Options.Sagas).
type Repair struct {
	rdb    redis.UniversalClient
	stock  *inventory.Stock
	ledger *ledger.Ledger
	keys   orderkey.Keys
	log    *slog.Logger
	o      RepairOptions
}

// NewRepair returns the repair of the sagas of the orders under prefix.
func NewRepair(rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger, o RepairOptions) *Repair {
	return &Repair{rdb: rdb, stock: stock, ledger: ledger.New(rdb, prefix, stock.Partitions()),
		keys: orderkey.New(prefix, stock.Partitions()), log: log, o: o}
}

// Repair settles every partition's stale holds, each claimed by sw as
// the due orders are; it returns the number settled and the first Redis
// error.
func (s *Repair) Repair(ctx context.Context, sw *sweeper.Sweeper) (int, error) {
	if !s.keys.Parts().Grouped() {
		return 0, nil
	}
	// Moves of units between a round's buckets that a crash left half
	// done: their units are on their way until finished.
	if _, err := s.stock.FinishMoves(ctx); err != nil {
		return 0, err
	}
	settled := 0
	for p := range s.keys.Parts().Count() {
		n, err := s.repairPartition(ctx, sw, p)
		settled += n
		if err != nil {
			return settled, err
		}
	}
	return settled, nil
}

func (s *Repair) repairPartition(ctx context.Context, sw *sweeper.Sweeper, p int) (int, error) {
	settled := 0
	for {
		n, more, err := sw.ClaimEach(ctx, "order sweeper: settle stale holds", p, s.keys.Holds(p), func(ctx context.Context, id string) (bool, error) {
			return true, s.settleHold(ctx, p, id)
		})
		settled += n
		if err != nil {
			return settled, fmt.Errorf("stale holds of partition %d: %w", p, err)
		}
		if !more {
			return settled, nil
		}
	}
}

// settleHold finishes or undoes the saga of order id, whose hold on
// partition p is past its deadline.
func (s *Repair) settleHold(ctx context.Context, p int, id string) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	rec, err := s.rdb.HMGet(ctx, s.keys.Hold(p, id), "attempt", "items", "user").Result()
	if err != nil {
		return fmt.Errorf("read hold %s: %w", id, err)
	}
	attempt, _ := rec[0].(string)
	raw, _ := rec[1].(string)
	user, _ := rec[2].(string)
	var items []order.ReservedItem
	if attempt == "" || json.Unmarshal([]byte(raw), &items) != nil || len(items) == 0 {
		// Settled meanwhile (the record is gone) or not a record this
		// package wrote: only the index entry is left to drop.
		return s.rdb.ZRem(ctx, s.keys.Holds(p), id).Err()
	}
	mode, err := s.decideHold(ctx, id, attempt, items)
	if err != nil {
		return err
	}
	n, err := unholdOn(ctx, s.rdb, s.keys, s.stock, p, id, user, attempt, mode, items)
	if err != nil {
		return fmt.Errorf("settle hold %s: %w", id, err)
	}
	s.log.Info("settled a stale order hold", "order", id, "partition", p, "outcome", mode, "units", max(n, 0))
	return nil
}

// decideHold decides on the order's home whether the hold of attempt on
// order id, holding items, is the order's ("drop") or no order's
// ("release").
func (s *Repair) decideHold(ctx context.Context, id, attempt string, items []order.ReservedItem) (string, error) {
	mark := 0 // PostgreSQL is asked after the tombstone: mark it deciding till then
	if s.o.Persisted != nil {
		mark = 1
	}
	decision, err := abortScript.Run(ctx, s.rdb, []string{s.keys.Status(id)}, abortedTTL.Milliseconds(), mark).StringSlice()
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
		var ordered []order.ReservedItem
		if json.Unmarshal([]byte(decision[2]), &ordered) != nil || len(ordered) == 0 {
			return "drop", nil // not recover's record: committed, items unknown
		}
		return dropIf(holdsItemsOf(ordered, items)), nil
	}
	return "release", nil // another attempt committed the order
}

// decideTombstoned decides the hold of order id, holding items, whose
// status is the tombstone: from now on no attempt can commit it, so
// PostgreSQL, asked now (RepairOptions.Persisted), tells for good whether
// one did before (a failover lost its status). An order PostgreSQL has is
// not aborted: its status, from PostgreSQL, replaces the tombstone (as
// recover writes it), and its hold is dropped when the order has its items (the committing
// attempt's), else given back (another attempt's, of a repeat). An order
// PostgreSQL does not have keeps its tombstone, now final, and its hold
// goes back. Either ends the decision before the hold is settled, so a
// crash in between leaves no mark behind a settled hold: the next repair
// of the hold decides again. With no Persisted check the tombstone alone
// decides: back.
func (s *Repair) decideTombstoned(ctx context.Context, id string, items []order.ReservedItem) (string, error) {
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
		if err := endDecisionScript.Run(ctx, s.rdb, []string{s.keys.Status(id)}).Err(); err != nil {
			return "", fmt.Errorf("end the decision on order %s: %w", id, err)
		}
		return "release", nil
	}
	// The order's status goes back over the tombstone and its mark, as
	// recover writes it: deleting the tombstone instead would leave the id
	// with no status, and a repeat of its Idempotency-Key would then run
	// the order again under the same id, taking its units a second time
	// for an event the writer ignores.
	if _, err := s.ledger.RestoreStatus(ctx, o.Confirmed, o.State); err != nil {
		return "", fmt.Errorf("end the decision on order %s: %w", id, err)
	}
	return dropIf(holdsItemsOf(o.Items, items)), nil
}

// holdsItemsOf reports whether the order's items include every item of a
// hold: the same SKU, quantity and round.
func holdsItemsOf(ordered, held []order.ReservedItem) bool {
	for _, h := range held {
		if !slices.ContainsFunc(ordered, func(o order.ReservedItem) bool {
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

// unholdOn runs unholdScript (mode "drop" or "release") on the hold of
// order id on partition p, whose record holds items in this order; it
// returns the units given back, -1 when attempt holds nothing there.
func unholdOn(ctx context.Context, rdb redis.Scripter, k orderkey.Keys, stock *inventory.Stock,
	p int, id, user, attempt, mode string, items []order.ReservedItem) (int64, error) {
	keys := []string{k.Hold(p, id), k.Holds(p)}
	args := []any{id, attempt, mode}
	for _, it := range items {
		at := stock.HomeIn(it.SKU, user, it.Buckets) // the bucket the hold took from
		keys = append(keys, at.Sale, at.Buyers)
		args = append(args, it.SKU, at.Channel)
	}
	keys = append(keys, k.Settled(p))
	args = append(args, ledger.SettledRetention.Milliseconds())
	n, err := unholdScript.Run(ctx, rdb, keys, args...).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%s hold of order %s on partition %d: %w", mode, id, p, err)
	}
	return n, nil
}
