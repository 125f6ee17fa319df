// Package audit checks the invariants that tie the live stock in Redis,
// the order stream and PostgreSQL together, for `shop audit` and GET
// /api/v1/admin/audit (API.md, "Audit"):
//
//   - for every live round, quantity == available + the units held by its
//     pending, confirmed and paid orders (released units are back in
//     available), computed twice, independently: from Redis (the buyer
//     counts) and from PostgreSQL (the order rows and their recorded
//     transitions, plus what the stream holds that no writer has recorded
//     yet), and compared buyer by buyer, so a difference names the buyer
//     and the orders;
//   - every order Redis accepted longer ago than the lag bound is in
//     PostgreSQL;
//   - every entry the writers' group has pending is still in the stream;
//   - the dead-letter stream is empty;
//   - PostgreSQL records no entry after the stream's last id (Redis lost
//     writes it had acknowledged: a failover; `shop recover` repairs it).
//
// It is its own package, not part of order or inventory, because it reads
// both (and both stores) and writes nothing: it sits above them, as the
// wiring does, and neither domain grows a dependency on the other's
// internals. It reads their keys through what they export (order.AuditKeys,
// order.ParseEntry, inventory's SaleKey and BuyersKey) and their tables
// read-only.
//
// Redis is read in one atomic script (snapshot.lua), so a sale going on
// does not make the two sides differ by timing: PostgreSQL is read after
// it and cut at the snapshot's last stream id (rows for later entries are
// left out; entries the snapshot holds unrecorded are counted once). The
// loadtest package's invariant checker (I1-I6) checks a finished load test
// from the outside; this is the product's own check of a running system.
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
	"github.com/shop-oss/shop/internal/order"
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
	db    *pgxpool.Pool
	rdb   redis.UniversalClient
	stock *inventory.Stock
	parts keyspace.Partitions
	keys  []order.StreamKeys // by partition
	log   *slog.Logger
	// LagBound: see DefaultLagBound.
	LagBound time.Duration
}

// New returns an auditor of the stores under prefix.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger) *Auditor {
	parts := stock.Partitions()
	return &Auditor{db: db, rdb: rdb, stock: stock, parts: parts, keys: order.PartitionKeys(prefix, parts),
		log: log, LagBound: DefaultLagBound}
}

// Report is an audit's answer.
type Report struct {
	OK       bool      `json:"ok"`
	Rounds   []Round   `json:"rounds"`
	Problems []Problem `json:"problems"`
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
	// stream's unrecorded entries.
	HeldRedis    int64 `json:"held_redis"`
	HeldPostgres int64 `json:"held_postgres"`
}

// Problem is one violation.
type Problem struct {
	// Kind: stock_redis, stock_postgres, quantity, buyer, not_persisted,
	// pending_missing, dead_letter, backlog, stream_behind.
	Kind string `json:"kind"`
	// Partition is the order partition the problem is in (a stream's, or
	// the SKU's).
	Partition *int     `json:"partition,omitempty"`
	SKU       string   `json:"sku,omitempty"`
	RoundID   int64    `json:"round_id,omitempty"`
	OrderIDs  []string `json:"order_ids,omitempty"`
	Detail    string   `json:"detail"`
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
	rep.OK = len(rep.Problems) == 0
	if rep.Problems == nil {
		rep.Problems = []Problem{}
	}
	if rep.Rounds == nil {
		rep.Rounds = []Round{}
	}
	sort.SliceStable(rep.Rounds, func(i, j int) bool { return rep.Rounds[i].SKU < rep.Rounds[j].SKU })
	return rep, nil
}

func wrap(op string, err error) error { return fmt.Errorf("audit: %s: %w", op, err) }
