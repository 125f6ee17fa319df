// Package recovery rebuilds the live stock after Redis lost writes (a
// failover to a replica that had not caught up, an AOF that lost its
// tail), for `shop recover`, and names the orders that were accepted but
// that neither store holds any more.
//
// For every live round (the newest round of each product in PostgreSQL,
// unless it ended more than the week its state is kept), the units held
// are those of every order known anywhere: PostgreSQL's rows, the order
// stream's events not yet written, the dead letters (rejected, their
// units never went back), and on a cluster the standing holds of
// checkouts not committed yet (below). An order holds its units unless
// its recorded final state (PostgreSQL's order_transitions, or a
// transition event in the stream) is cancelled or expired. Then available = quantity - held, each buyer's
// count is the units of their orders, and the released set and count are
// the cancelled and expired orders: no unit any known order holds can be
// sold again, and no release gives a unit back twice.
//
// It is safe while `shop serve` and the writers run: each SKU is written
// by inventory's restore script only if the SKU's sale hash still holds
// what was read before the stores were (Stock.ReadFence): every
// reservation and release changes it, so an unchanged fence means the
// rebuilt state is still exact; a SKU whose stock moved is read again (a
// few times, then recover gives up and asks for the sale to be paused).
// The stream is read before PostgreSQL, so an entry written and trimmed in
// between is found in PostgreSQL. Running it twice changes nothing the
// second time.
//
// Lost orders: an order id the operator says was accepted (the clients'
// or load driver's log of 202 answers) that PostgreSQL does not have and
// no event in the order stream or the dead letters names. The streams are
// read before PostgreSQL, so an order written and trimmed meanwhile is
// not called lost, and an accepted order's event is in the stream from
// its 202 until it is written: the report is exact for the ids given.
//
// Partitions: every partition's stream and dead letters are read (an
// order's event is in its home partition, its lines' stock in theirs, so
// every round is rebuilt from the orders of every partition); each SKU is
// restored by one script in its own slot (on a cluster, its partition's);
// every partition's stream is advanced past the newest id PostgreSQL
// recorded (PostgreSQL does not say which partition an entry was in, and
// any recorded id is in the past, so new entries of each are numbered past
// it anyway); restored statuses name their order's home partition and go
// in its due set (order.RestoreStatuses). Nothing here needs two
// partitions at one instant: each SKU's restore is fenced on its own.
//
// Holds (a cluster's checkouts in flight): a cross-shard checkout takes
// its lines outside its home in a hold (order's hold.lua) before its
// commit writes the order's event, so for a while only the hold names
// those units. Every live round also counts, as their buyer's, the lines
// of every standing hold (order.ReadHolds) whose order neither PostgreSQL
// nor a stream names there, and they are then counted once whatever
// happens to the hold: the order commits, and its event names it from
// then on while the drop keeps the units; or it does not, and the saga or
// the repair gives the hold back once (the unhold script's release adds
// the units back and takes them off the buyer's count) onto a stock that
// counted them. An order a store names is counted from there alone (its
// final state decides), never for its hold too: each line is counted once
// per order id, the rule by which the audit counts a foreign line once
// (internal/audit's package doc). The audit's time fence is not needed:
// recover takes no units from the settled log (an entry names a
// committed order, which the streams or PostgreSQL know unless a failover
// lost it, and then the units were the lost order's and go back), and a
// known order's final state comes from PostgreSQL and the streams, not
// from the released sets a failover may have cut.
//
// The reads go in this order: each SKU's fence, every partition's holds
// (each partition's in one script), the streams, PostgreSQL. A hold taken
// or given back after its SKU's fence was read moves the fence (hold.lua
// takes from available, a release adds to it), so the SKU is read again.
// A drop (the order committed) moves no stock, but the commit added the
// order's event before it: a hold dropped before the holds are read is
// named by the streams, read after, or by PostgreSQL (an entry written
// and trimmed meanwhile is there); a hold read and dropped afterwards is
// named by the hold, and maybe by a stream or PostgreSQL too, and counted
// once by its order id. An order moving from hold to committed while
// recover runs is neither missed nor counted twice.
//
// On a cluster each partition's settled log (the audit's record of the
// lines taken there for orders homed elsewhere, order.ReadSettled) is
// brought in step with the rebuilt stock afterwards: every order counted
// as holding units in a partition other than its home gets an entry there
// if the log and the holds name it nowhere (the failover lost its drop),
// and an entry of a live round naming an order no store knows (lost) goes.
// The logs and holds are read before the streams and PostgreSQL, so an
// entry a drop adds meanwhile names an order those reads know; an order
// counted from its hold alone gets no entry (the hold names it, and its
// drop writes one). Until this step is done an audit may report the
// partitions a failover hit; run it after.
//
// It reads order's keys through order.PartitionKeys, order.ParseEntry,
// order.ReadHolds and order.ReadSettled, and order's and inventory's
// tables read-only, as the audit does; it writes only through inventory
// (Stock.Restore) and order (AdvanceStream, RestoreStatuses,
// RestoreSettled). Restore hands every buyer of a SKU to one script: the
// buyer counts must be replaced at once with the fence checked, so they
// are not split into batches.
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
	"github.com/shop-oss/shop/internal/order"
)

// Attempts is how many times a SKU whose stock keeps moving is read and
// restored again before recover gives up.
const Attempts = 10

// Recoverer rebuilds the live stock under one key prefix.
type Recoverer struct {
	db     *pgxpool.Pool
	rdb    redis.UniversalClient
	stock  *inventory.Stock
	prefix string
	parts  keyspace.Partitions
	keys   []order.StreamKeys // by partition
	log    *slog.Logger
	// betweenReads, when set (tests), runs in each attempt after the holds
	// are read and before the streams are: where a checkout may commit.
	betweenReads func()
}

// New returns a recoverer of the stores under prefix.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger) *Recoverer {
	parts := stock.Partitions()
	return &Recoverer{db: db, rdb: rdb, stock: stock, prefix: prefix, parts: parts,
		keys: order.PartitionKeys(prefix, parts), log: log}
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
	// order.ReadSettled) written or removed to match the rebuilt stock.
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
	fences := make([]inventory.Fence, len(rounds))
	for i, lr := range rounds {
		if fences[i], err = r.stock.ReadFence(ctx, lr.sku); err != nil {
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
			err = checkFence(lr, fences[i])
		}
		if err != nil {
			return nil, nil, nil, err
		}
		changed, err := r.stock.Restore(ctx, lr.sku, fences[i], st)
		switch {
		case errors.Is(err, inventory.ErrMoved):
			moved = append(moved, lr)
			continue
		case err != nil:
			return nil, nil, nil, err
		}
		done = append(done, roundReport(lr, st, held[lr.id], string(fences[i]), changed))
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
