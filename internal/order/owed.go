package order

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
)

// Cancel and expiry of an order whose lines lie in several partitions of a
// Redis Cluster (a cross-shard checkout).
// More in docs/design/order.md ("owed.go").

// owedGrace is how long after a spread order's decision a sweeper may take
// it up: well past the few seconds the steps after it take (each bounded by
// lifecycleTimeout), so it finishes only what a stop left. Taking one up
// early would be harmless (step 3 is idempotent), only wasted.
const owedGrace = 10 * time.Second

var (
	//go:embed decide.lua
	decideLua    string
	decideScript = redis.NewScript(decideLua)
)

// spread reports whether o has lines outside its home partition (only on
// a cluster: on a single Redis every key shares the one server).
func (l *lifecycle) spread(o Order) bool {
	if !l.keys.Parts().Grouped() {
		return false
	}
	for _, it := range o.lines {
		if l.linePartition(o, it) != o.partition {
			return true
		}
	}
	return false
}

// linesByPartition splits o's lines: those of its home partition, and the
// others by partition.
func (l *lifecycle) linesByPartition(o Order) (home []inventory.ReleaseLine, foreign map[int][]inventory.ReleaseLine) {
	foreign = map[int][]inventory.ReleaseLine{}
	for _, it := range o.lines {
		line := releaseLine(it)
		if p := l.linePartition(o, it); p != o.partition {
			foreign[p] = append(foreign[p], line)
		} else {
			home = append(home, line)
		}
	}
	return home, foreign
}

// giveBackSpread is giveBack for an order with lines in several partitions
// (see the steps above). Its answer is the decision's: Refused with the
// state another step left, or the units given back, the other partitions'
// included when their releases went through now. An error before or in the
// decision leaves the outcome unknown (the owed entry lets the sweeper
// settle it); one after it is logged, and the sweeper finishes the rest.
func (l *lifecycle) giveBackSpread(ctx context.Context, o Order, to string) (inventory.Released, error) {
	at := time.Now().Add(owedGrace).UnixMilli()
	if err := l.rdb.ZAddNX(ctx, l.keys.Owed(o.partition), redis.Z{Score: float64(at), Member: o.ID}).Err(); err != nil {
		return inventory.Released{}, fmt.Errorf("give back order %s: note the owed releases: %w", o.ID, err)
	}
	r, err := l.decide(ctx, o, to)
	if err != nil {
		return r, err
	}
	if l.faultAfterDecision != nil {
		if err := l.faultAfterDecision(); err != nil {
			return r, err
		}
	}
	state := to
	if r.Refused {
		state = r.State
	}
	if GivenBack(state) {
		// Ours or another's decision: finish its releases either way, so
		// the owed entry can go.
		units, err := l.releaseForeign(ctx, o)
		if err != nil {
			l.warn("give back order: other partitions' units left to the sweeper", o.ID, err)
			return r, nil
		}
		if !r.Refused {
			r.Units += units
		}
	}
	if err := l.rdb.ZRem(ctx, l.keys.Owed(o.partition), o.ID).Err(); err != nil {
		l.warn("give back order: owed entry left to the sweeper", o.ID, err)
	}
	if r.Refused {
		return r, nil
	}
	// Out of the due set: harmless if this fails, as in giveBack.
	_ = l.rdb.ZRem(ctx, l.keys.Due(o.partition), o.ID).Err()
	return r, nil
}

// decide is the decision of a spread order's release: the guarded release
// of its home's lines, or, for an order whose home holds none of them (a
// checkout retried under an Idempotency-Key with another cart keeps the
// first try's id, and so its home), the same guarded status change and
// transition event with no units (decide.lua), in the home's slot either
// way, against pay.lua on the same status.
func (l *lifecycle) decide(ctx context.Context, o Order, to string) (inventory.Released, error) {
	if home, _ := l.linesByPartition(o); len(home) > 0 {
		return l.stock.Release(ctx, l.guarded(ctx, o, to, home))
	}
	g := l.guarded(ctx, o, to, nil)
	args := []any{g.Guard.Field, g.Guard.To, strings.Join(g.Guard.From, ",")}
	for _, v := range g.Outbox.Values {
		args = append(args, v)
	}
	reply, err := decideScript.Run(ctx, l.rdb, []string{g.Guard.Key, g.Outbox.Stream}, args...).StringSlice()
	if err != nil {
		return inventory.Released{}, fmt.Errorf("decide order %s: %w", o.ID, err)
	}
	if len(reply) == 2 && reply[0] == "refused" {
		return inventory.Released{Refused: true, State: reply[1]}, nil
	}
	if len(reply) != 1 || reply[0] != "ok" {
		return inventory.Released{}, fmt.Errorf("decide order %s: unexpected reply %q", o.ID, reply)
	}
	return inventory.Released{}, nil
}

// releaseForeign gives back o's lines outside its home partition, one
// release per partition (in ascending order), unguarded: a line released
// before gives nothing again. It returns the units given back now.
func (l *lifecycle) releaseForeign(ctx context.Context, o Order) (int64, error) {
	_, foreign := l.linesByPartition(o)
	parts := make([]int, 0, len(foreign))
	for p := range foreign {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var units int64
	for _, p := range parts {
		r, err := l.stock.Release(ctx, inventory.Release{OrderID: o.ID, UserID: o.userID, Lines: foreign[p],
			Outbox: l.releaseRecord(o.ID, p, foreign[p])})
		if err != nil {
			return units, fmt.Errorf("release order %s in partition %d: %w", o.ID, p, err)
		}
		units += r.Units
	}
	return units, nil
}

// releaseRecord is the entry partition p's releases log gets, in the
// release's step, when the release of lines there gives units back (the
// audit's record of when o joined p's released sets).
func (l *lifecycle) releaseRecord(id string, p int, lines []inventory.ReleaseLine) *inventory.Outbox {
	skus := make([]string, len(lines))
	for i, ln := range lines {
		skus[i] = ln.SKU
	}
	return &inventory.Outbox{Stream: l.keys.Releases(p), Values: []string{"order_id", id, "skus", strings.Join(skus, ",")}, WhenGiven: true}
}

// settle is the sweeper's look at a spread order in partition p's owed
// set: done is true when the entry is gone (nothing is or will be owed, or
// everything owed went back).
func (l *lifecycle) settle(ctx context.Context, p int, id string) (done bool, err error) {
	o, found, err := l.read(ctx, id)
	if err != nil {
		return false, fmt.Errorf("settle order %s: %w", id, err)
	}
	if found {
		switch o.Status {
		case StatusPending, StatusConfirmed:
			return false, nil // no decision yet: the claim's lease brings it back
		case StatusCancelled, StatusExpired, StatusRefunded:
			if _, err := l.releaseForeign(ctx, o); err != nil {
				return false, err
			}
		}
	}
	if err := l.rdb.ZRem(ctx, l.keys.Owed(p), id).Err(); err != nil {
		return false, fmt.Errorf("settle order %s: %w", id, err)
	}
	return true, nil
}

func (l *lifecycle) warn(msg, id string, err error) {
	if l.log != nil {
		l.log.Warn(msg, "order", id, "err", err)
	}
}
