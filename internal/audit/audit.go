// Package audit checks that the live stock in Redis, the order stream and
// PostgreSQL agree, for `shop audit` and GET /api/v1/admin/audit: every
// live round's units, computed from each store and compared buyer by
// buyer; orders persisted within the lag bound; pending entries still in
// their streams; no dead letters; no entry PostgreSQL has past its
// stream's last id. It reads both domains and both stores and writes
// nothing but its latest outcome (for the metrics); Every runs it on a
// schedule.
//
// The reasoning behind it is in docs/design/audit.md.
package audit

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/room"
)

// DefaultLagBound is how long an accepted order may go unrecorded in
// PostgreSQL before the audit calls it missing: far past the writer's
// claim of a dead consumer's entries (30 s) and its usual lag.
const DefaultLagBound = 2 * time.Minute

// maxEntries bounds the stream entries one audit reads (pending and
// undelivered each); a longer backlog is itself reported.
const maxEntries = 100000

// Auditor runs audits.
type Auditor struct {
	db     *pgxpool.Pool
	rdb    redis.UniversalClient
	stock  *inventory.Stock
	parts  keyspace.Partitions
	ledger *ledger.Ledger // order's keys and status hashes
	log    *slog.Logger
	// lastKey holds the latest outcome (Latest).
	lastKey string
	// LagBound: see DefaultLagBound.
	LagBound time.Duration
	// SettledWindow is the settled log's retention as the cluster audit's
	// time fence reads it (package doc): ledger.SettledRetention, or any
	// shorter span still far above the masters' clock differences.
	SettledWindow time.Duration
	// Rooms, when set, has every waiting room checked too (room.Audit).
	Rooms *room.Service
	// AfterRun, when set, is called after each audit a schedule (Every)
	// runs; tests count them.
	AfterRun func()
}

// New returns an auditor of the stores under prefix.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger) *Auditor {
	parts := stock.Partitions()
	return &Auditor{db: db, rdb: rdb, stock: stock, parts: parts, ledger: ledger.New(rdb, prefix, parts),
		log: log, lastKey: prefix + "audit:last", LagBound: DefaultLagBound, SettledWindow: ledger.SettledRetention}
}

// Report is an audit's answer.
type Report struct {
	OK       bool      `json:"ok"`
	Rounds   []Round   `json:"rounds"`
	Problems []Problem `json:"problems"`
	// NeverLive names the recorded rounds that never went live (their
	// seeding failed, and no later one took them over): history, not a
	// problem.
	NeverLive []NeverLive `json:"never_live"`
}

// NeverLive is a recorded round that never went live.
type NeverLive struct {
	SKU      string    `json:"sku"`
	RoundID  int64     `json:"round_id"`
	Quantity int64     `json:"quantity"`
	SeededAt time.Time `json:"seeded_at"`
}

// Round is one live round as both sides see it.
type Round struct {
	SKU       string `json:"sku"`
	RoundID   int64  `json:"round_id"`
	Quantity  int64  `json:"quantity"`
	Available int64  `json:"available"`
	Released  int64  `json:"released"`
	// HeldRedis: the round's buyer counts; HeldPostgres: the units of its
	// orders that are not cancelled or expired, from PostgreSQL and the
	// stream's unrecorded entries (on a cluster, the lines of orders homed
	// in another partition from this SKU's partition's holds, settled log
	// and released set: see the package doc).
	HeldRedis    int64 `json:"held_redis"`
	HeldPostgres int64 `json:"held_postgres"`
	// Moving: units of a stock bucket's moves under way between buckets
	// (on a cluster, taken out of one and not yet added to another).
	Moving int64 `json:"moving,omitempty"`
}

// Problem is one violation.
type Problem struct {
	// Kind: stock_redis, stock_postgres, quantity, buyer, bucket,
	// not_persisted, pending_missing, dead_letter, backlog, stream_behind;
	// the waiting rooms': room_rate, room_pass, room_order; and the
	// draws': draw_sold, draw_overwon, draw_captured_cancelled,
	// draw_not_cancelled (draws.go).
	Kind string `json:"kind"`
	// Bucket is a bucket problem's stock bucket (0 first).
	Bucket *int `json:"bucket,omitempty"`
	// Partition is the order partition the problem is in (a stream's, or
	// the SKU's).
	Partition *int     `json:"partition,omitempty"`
	SKU       string   `json:"sku,omitempty"`
	RoundID   int64    `json:"round_id,omitempty"`
	OrderIDs  []string `json:"order_ids,omitempty"`
	// UserIDs are a room problem's shoppers.
	UserIDs []string `json:"user_ids,omitempty"`
	// EntryIDs are a draw problem's entries.
	EntryIDs []string `json:"entry_ids,omitempty"`
	Detail   string   `json:"detail"`
}

// Run audits everything now. Its error is a store's (the audit could not
// be made); violations are in the report.
func (a *Auditor) Run(ctx context.Context) (Report, error) {
	skus, err := a.recordedRounds(ctx)
	if err != nil {
		return Report{}, err
	}
	snap, err := a.snapshot(ctx, skus)
	if err != nil {
		return Report{}, err
	}
	rows, quantities, err := a.heldRows(ctx, snap.liveRoundIDs())
	if err != nil {
		return Report{}, err
	}
	lasts, err := a.lastIDs(ctx)
	if err != nil {
		return Report{}, err
	}
	homes, err := a.homes(ctx, rows, snap.lasts(), lasts)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	rep.Rounds, rep.Problems = compareRounds(snap, rows, homes, quantities)
	behind := streamBehind(rows, homes, lasts)
	rep.Problems = append(rep.Problems, behind...)
	more, err := a.streamProblems(ctx, snap)
	if err != nil {
		return Report{}, err
	}
	rep.Problems = append(rep.Problems, more...)
	draws, err := a.drawProblems(ctx)
	if err != nil {
		return Report{}, err
	}
	rep.Problems = append(rep.Problems, draws...)
	if rep.NeverLive, err = a.neverLive(ctx, snap.liveRoundIDs()); err != nil {
		return Report{}, err
	}
	if a.Rooms != nil {
		found, err := a.Rooms.Audit(ctx)
		if err != nil {
			return Report{}, wrap("waiting rooms", err)
		}
		for _, f := range found {
			rep.Problems = append(rep.Problems, Problem{Kind: f.Kind, SKU: f.SKU, RoundID: f.RoundID,
				UserIDs: f.Users, Detail: f.Detail})
		}
	}
	rep.OK = len(rep.Problems) == 0
	if rep.Problems == nil {
		rep.Problems = []Problem{}
	}
	if rep.Rounds == nil {
		rep.Rounds = []Round{}
	}
	sort.SliceStable(rep.Rounds, func(i, j int) bool { return rep.Rounds[i].SKU < rep.Rounds[j].SKU })
	a.remember(ctx, rep)
	return rep, nil
}

func wrap(op string, err error) error { return fmt.Errorf("audit: %s: %w", op, err) }
