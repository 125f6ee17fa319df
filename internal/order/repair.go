package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
)

// The repair of sagas a crash left between hold and commit (Redis Cluster
// only; see saga.go). Each partition's holds are indexed by deadline; the
// sweeper claims those past it (claimScript, with a lease, as it claims
// due orders) and settles each on the order's home first (abortScript):
// the order committed, so the hold is dropped, or it never did and now
// never will (a tombstone refuses a late commit), so the hold's units go
// back, once (unholdScript deletes the record it acts on). Two sweepers
// at once settle a hold the same way, and only one gives units back.
// Before a missing status is tombstoned, PostgreSQL is asked (with
// SweeperOptions.Persisted): an order it has committed, and a failover
// lost its status, so its hold is dropped and its units stay its own
// (recover writes the status back); only an order no store has written is
// undone.

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
		for _, id := range reply[2:] {
			if err := s.settleHold(ctx, p, id); err != nil {
				return settled, err
			}
			settled++
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
	persisted, err := s.lostButPersisted(ctx, id)
	if err != nil {
		return err
	}
	mode := "drop"
	if !persisted {
		decision, err := abortScript.Run(ctx, l.rdb, []string{l.keys.status(id)}, abortedTTL.Milliseconds()).StringSlice()
		if err != nil || len(decision) == 0 {
			return fmt.Errorf("decide the saga of order %s: %w", id, err)
		}
		// A committed order keeps its committing attempt's hold. A status
		// with no attempt is one recover wrote back from PostgreSQL after a
		// failover lost it: the order committed, by whichever attempt, and
		// its units stay taken (recover rebuilt the stock from PostgreSQL),
		// so its hold is dropped too: giving it back would sell those units
		// twice.
		if decision[0] != "committed" || len(decision) != 2 || (decision[1] != attempt && decision[1] != "") {
			mode = "release"
		}
	}
	n, err := unholdOn(ctx, l.rdb, l.keys, l.stock, l.stock.ChangesChannel, p, id, attempt, mode, items)
	if err != nil {
		return fmt.Errorf("settle hold %s: %w", id, err)
	}
	s.log.Info("settled a stale order hold", "order", id, "partition", p, "outcome", mode, "units", max(n, 0))
	if n > 0 && l.changed != nil {
		skus := make([]string, len(items))
		for i, it := range items {
			skus[i] = it.SKU
		}
		l.changed(ctx, skus)
	}
	return nil
}

// lostButPersisted reports whether order id has no status on its home
// and PostgreSQL has it: it committed (only a commit writes the event the
// writer persists) and a failover lost its status, and the repair must
// not tombstone it and give its units back. With no Persisted check the
// answer is false (the repair decides by the status alone). A status that
// appears after the look is the abort script's to find.
func (s *Sweeper) lostButPersisted(ctx context.Context, id string) (bool, error) {
	if s.o.Persisted == nil {
		return false, nil
	}
	n, err := s.life.rdb.Exists(ctx, s.life.keys.status(id)).Result()
	if err != nil || n > 0 {
		return false, err
	}
	ok, err := s.o.Persisted(ctx, id)
	if err != nil {
		return false, fmt.Errorf("is order %s in PostgreSQL: %w", id, err)
	}
	return ok, nil
}

// PersistedIn is a SweeperOptions.Persisted that asks db's orders table.
func PersistedIn(db *pgxpool.Pool) func(context.Context, string) (bool, error) {
	return func(ctx context.Context, id string) (bool, error) {
		var ok bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders WHERE id = $1::uuid)`, id).Scan(&ok)
		return ok, err
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
