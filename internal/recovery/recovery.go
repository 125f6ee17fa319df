// Package recovery rebuilds the live stock after Redis lost writes (a
// failover to a replica that had not caught up, an AOF that lost its
// tail), for `shop recover`, and names the orders that were accepted but
// that neither store holds any more.
//
// The reasoning behind it is in docs/design/recovery.md.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/saga"
)

// Attempts is how many times a SKU whose stock keeps moving is read and
// restored again before recover gives up.
const Attempts = 10

// Recoverer rebuilds the live stock under one key prefix.
type Recoverer struct {
	db     *pgxpool.Pool
	rdb    redis.UniversalClient
	stock  *inventory.Stock
	parts  keyspace.Partitions
	ledger *ledger.Ledger // order's keys and status hashes
	sagas  *saga.Ledger   // the sagas' holds and settled logs
	log    *slog.Logger
	// betweenReads, when set (InjectBetweenReads), runs in each attempt
	// after the holds are read and before the streams are.
	betweenReads func()
}

// InjectBetweenReads makes Run call f in each attempt after it reads the
// holds and before it reads the streams, where a checkout may commit: for
// the fault drills. Set it before Run.
func (r *Recoverer) InjectBetweenReads(f func()) { r.betweenReads = f }

// New returns a recoverer of the stores under prefix.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger) *Recoverer {
	parts := stock.Partitions()
	return &Recoverer{db: db, rdb: rdb, stock: stock, parts: parts,
		ledger: ledger.New(rdb, prefix, parts), sagas: saga.NewLedger(rdb, parts), log: log}
}

// Report is what a recovery did and found.
type Report struct {
	Rounds []Round `json:"rounds"`
	// Lost are the accepted orders in neither store, sorted by id.
	Lost []Lost `json:"lost"`
	// Accepted is how many distinct accepted ids were checked.
	Accepted int `json:"accepted"`
	// StatusesRestored counts the confirmed orders whose Redis status was
	// lost and is written again, so that they can be paid, cancelled and
	// expired.
	StatusesRestored int `json:"statuses_restored"`
	// SettledRestored counts the settled log entries (a cluster's, see
	// saga.Ledger.ReadSettled) written or removed to match the rebuilt
	// stock.
	SettledRestored int `json:"settled_restored"`
	// Attempts is how many times the stores were read: more than one
	// when stock moved meanwhile.
	Attempts int `json:"attempts"`
}

// Round is one live round as recovered.
type Round struct {
	SKU       string `json:"sku"`
	RoundID   int64  `json:"round_id"`
	Quantity  int64  `json:"quantity"`
	Available int64  `json:"available"`
	Held      int64  `json:"held"`
	Released  int64  `json:"released"`
	Orders    int    `json:"orders"`
	Buyers    int    `json:"buyers"`
	// Before is the stock Redis had (its fence: round available released).
	Before string `json:"before"`
	// HeldByHolds is the part of Held that standing saga holds took for
	// orders no store names yet (a cluster's checkouts in flight).
	HeldByHolds int64 `json:"held_by_holds,omitempty"`
	// Changed: the rebuilt state differed from Redis's and was written.
	Changed bool `json:"changed"`
}

// Lost is an accepted order neither store holds.
type Lost struct {
	OrderID string `json:"order_id"`
	// Status is what the order's status hash in Redis still says, if it
	// survived without its event ("" when gone too): no writer will ever
	// write the order.
	Status string `json:"status,omitempty"`
}

// ErrBusy: a SKU's stock moved on every attempt.
var ErrBusy = errors.New("the live stock kept changing while it was rebuilt: pause purchases and run recover again")

// Run rebuilds every live round and checks the accepted order ids.
func (r *Recoverer) Run(ctx context.Context, accepted []string) (Report, error) {
	rounds, err := r.liveRounds(ctx)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	var lastScan *scan
	todo := rounds
	for attempt := 1; len(todo) > 0; attempt++ {
		if attempt > Attempts {
			return rep, fmt.Errorf("recover %s: %w", skusOf(todo), ErrBusy)
		}
		rep.Attempts = attempt
		done, moved, sc, err := r.attempt(ctx, todo)
		if err != nil {
			return rep, err
		}
		rep.Rounds, lastScan, todo = append(rep.Rounds, done...), sc, moved
		if len(moved) > 0 {
			r.log.Info("recover: stock moved while it was read; again", "skus", skusOf(moved), "attempt", attempt)
			time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
		}
	}
	sort.Slice(rep.Rounds, func(i, j int) bool { return rep.Rounds[i].SKU < rep.Rounds[j].SKU })
	if err := r.advance(ctx); err != nil {
		return rep, err
	}
	if rep.StatusesRestored, err = r.restoreStatuses(ctx, rounds); err != nil {
		return rep, err
	}
	if rep.SettledRestored, err = r.restoreSettled(ctx, rounds); err != nil {
		return rep, err
	}
	if lastScan == nil { // no live round: the streams still decide what is lost
		if lastScan, err = r.scanStreams(ctx); err != nil {
			return rep, err
		}
	}
	rep.Lost, rep.Accepted, err = r.lost(ctx, lastScan, accepted)
	return rep, err
}

// attempt reads the fences, then the holds, then the streams, then
// PostgreSQL, and restores each round whose fence held (the package doc
// says why in this order).
func (r *Recoverer) attempt(ctx context.Context, rounds []liveRound) (done []Round, moved []liveRound, sc *scan, err error) {
	fences := make([][]inventory.Fence, len(rounds))
	for i, lr := range rounds {
		if fences[i], err = r.readFences(ctx, lr); err != nil {
			return nil, nil, nil, err
		}
	}
	holds, err := r.readHolds(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if r.betweenReads != nil {
		r.betweenReads()
	}
	if sc, err = r.scanStreams(ctx); err != nil {
		return nil, nil, nil, err
	}
	held, err := r.heldOrders(ctx, rounds, sc, holds)
	if err != nil {
		return nil, nil, nil, err
	}
	for i, lr := range rounds {
		st, err := rebuild(lr, held[lr.id])
		if err == nil {
			err = checkFence(lr, fences[i][0])
		}
		if err != nil {
			return nil, nil, nil, err
		}
		changed, err := r.restoreRound(ctx, lr, fences[i], st, held[lr.id])
		switch {
		case errors.Is(err, inventory.ErrMoved):
			moved = append(moved, lr)
			continue
		case err != nil:
			return nil, nil, nil, err
		}
		done = append(done, roundReport(lr, st, held[lr.id], string(fences[i][0]), changed))
	}
	return done, moved, sc, nil
}

// checkFence refuses to replace a round newer than PostgreSQL's: it was
// seeded after this recovery read the rounds.
func checkFence(lr liveRound, f inventory.Fence) error {
	var round int64
	if _, err := fmt.Sscan(strings.Fields(string(f) + " 0")[0], &round); err == nil && round > lr.id {
		return fmt.Errorf("recover %s: Redis is on round %d, newer than PostgreSQL's %d: run recover again", lr.sku, round, lr.id)
	}
	return nil
}

func skusOf(rounds []liveRound) string {
	s := make([]string, len(rounds))
	for i, lr := range rounds {
		s[i] = lr.sku
	}
	return strings.Join(s, ", ")
}

// ParseAccepted reads order ids, one a line (blank lines and lines
// starting with # are skipped), each a UUID, and returns them without
// repeats in first-seen order.
func ParseAccepted(text string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := uuid.Parse(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %q is not an order id", i+1, line)
		}
		if s := id.String(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

func wrap(op string, err error) error { return fmt.Errorf("recover: %s: %w", op, err) }
