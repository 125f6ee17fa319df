package inventory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shop-oss/shop/internal/api"
	"github.com/shop-oss/shop/internal/database"
)

// Sale rounds: PostgreSQL records each seeding (what was put on sale, and,
// through the order writer, what was confirmed sold); Redis holds the live
// round. Seeding writes PostgreSQL first, then opens the round in Redis in
// one script. If Redis fails in between, the round row exists but never
// opened: it sells nothing, and the admin's retry opens a newer one.
//
// Each step has its deadline (dbTimeout, redisTimeout), so a hung store
// answers 503 within dbTimeout + redisTimeout, never a hang. What a 503
// guarantees: the round is not live, and does not go live later. A hung
// PostgreSQL may still commit the round's row once it resumes (the
// statement was sent; nothing can call it back), but that row is never
// opened, as above. A hung Redis may run the seed script once it resumes,
// but the script carries the deadline the shop waited for, and refuses
// to open the round past it (by Redis's clock, so the guarantee assumes
// the two clocks agree to well within redisTimeout).
const (
	insertRoundSQL = `
WITH p AS (SELECT price_cents FROM products WHERE sku = $1 FOR SHARE)
INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents, starts_at, ends_at)
SELECT $1, $2, $3, p.price_cents, $4, $5 FROM p
RETURNING id, price_cents, seeded_at`

	// paid reads the order package's tables (read only): the units of the
	// round's orders whose recorded final state is paid.
	selectRoundSQL = `
SELECT r.id, r.quantity, r.sold, r.per_user_limit, r.starts_at, r.ends_at,
       (SELECT coalesce(sum(i.quantity), 0) FROM order_items i
        JOIN order_transitions t ON t.order_id = i.order_id AND t.status = 'paid'
        WHERE i.round_id = r.id)
FROM sale_rounds r WHERE r.sku = $1 AND ($2 = 0 OR r.id = $2)
ORDER BY r.id DESC LIMIT 1`

	productExistsSQL = `SELECT EXISTS (SELECT 1 FROM products WHERE sku = $1)`
)

// ErrRoundSuperseded is returned when a newer round of the same SKU was
// opened while this one was being seeded: the newer one stands.
var ErrRoundSuperseded = api.NewError(api.CodeConflict, "a newer sale round was seeded at the same time")

// Sales seeds sale rounds and reports on them.
type Sales struct {
	db    *pgxpool.Pool
	stock *Stock

	// afterRecord, for tests, is called between an opening round's
	// PostgreSQL record and its Redis step.
	afterRecord func()
}

// NewSales returns the sale-round service.
func NewSales(db *pgxpool.Pool, stock *Stock) *Sales { return &Sales{db: db, stock: stock} }

// Seed is an admin's request to open a sale round.
type Seed struct {
	Quantity     int
	PerUserLimit int       // 0: unlimited
	StartsAt     time.Time // zero: open now
	EndsAt       time.Time // zero: no end
}

// StockReport is the state of a SKU's current sale round.
type StockReport struct {
	SKU          string     `json:"sku"`
	Quantity     int64      `json:"quantity"`
	Available    int64      `json:"available"`
	Sold         int64      `json:"sold"`
	Confirmed    int64      `json:"confirmed"`
	Paid         int64      `json:"paid"`
	Released     int64      `json:"released"`
	PerUserLimit int        `json:"per_user_limit"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
	RoundID      *int64     `json:"round_id"`
}

// Open records a new round for sku and opens it: available becomes the
// quantity, per-user counts start from zero, the unit price is the
// product's. Errors: an invalid_request error for a sale window out of
// range (checked before anything is recorded), ErrProductNotFound,
// ErrRoundSuperseded, or a 503.
func (s *Sales) Open(ctx context.Context, sku string, seed Seed) (StockReport, error) {
	if errs := seed.checkWindow(time.Now()); len(errs) > 0 {
		return StockReport{}, api.Invalid(errs...)
	}
	conn, unlock, err := lockSale(ctx, s.db, sku)
	if err != nil {
		return StockReport{}, err
	}
	defer unlock()
	round, price, err := s.record(ctx, conn, sku, seed)
	if err != nil {
		return StockReport{}, err
	}
	if s.afterRecord != nil {
		s.afterRecord()
	}
	live := LiveRound{
		Round: round, Quantity: int64(seed.Quantity), Available: int64(seed.Quantity),
		PerUserLimit: seed.PerUserLimit, StartsAt: seed.StartsAt, EndsAt: seed.EndsAt, PriceCents: price,
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	switch err := s.stock.OpenRound(rctx, sku, live); {
	case errors.Is(err, errStaleRound):
		return StockReport{}, ErrRoundSuperseded
	case errors.Is(err, errTooLate):
		return StockReport{}, fmt.Errorf("open sale round: %w: %w", api.Unavailable("the store is unavailable"), err)
	case err != nil:
		return StockReport{}, unavailable("open sale round", err)
	}
	return report(sku, live, 0), nil
}

// record inserts the round's row and returns its id and unit price.
func (s *Sales) record(ctx context.Context, q rowQuerier, sku string, seed Seed) (round, price int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var seededAt time.Time
	err = q.QueryRow(ctx, insertRoundSQL, sku, seed.Quantity, seed.PerUserLimit,
		nullTime(seed.StartsAt), nullTime(seed.EndsAt)).Scan(&round, &price, &seededAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrProductNotFound
	}
	if err != nil {
		return 0, 0, unavailable("record sale round", err)
	}
	return round, price, nil
}

// Report returns the state of sku's live round, or of its latest recorded
// round when none is live (all zero when it never had one). Errors:
// ErrProductNotFound, or a 503.
func (s *Sales) Report(ctx context.Context, sku string) (StockReport, error) {
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	live, ok, err := s.stock.Live(rctx, sku)
	cancel()
	if err != nil {
		return StockReport{}, unavailable("live stock", err)
	}
	ctx, cancel = context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var r LiveRound
	var confirmed, paid int64
	var starts, ends *time.Time
	err = s.db.QueryRow(ctx, selectRoundSQL, sku, live.Round).
		Scan(&r.Round, &r.Quantity, &confirmed, &r.PerUserLimit, &starts, &ends, &paid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s.noRound(ctx, sku)
	case err != nil:
		return StockReport{}, unavailable("sale round", err)
	}
	r.StartsAt, r.EndsAt = deref(starts), deref(ends)
	if ok {
		r.Available, r.Released = live.Available, live.Released
	} else {
		r.Available = 0 // recorded but not live: nothing can be bought
	}
	rep := report(sku, r, confirmed)
	rep.Paid = paid
	return rep, nil
}

// ProductExists tells whether the catalog has sku.
func (s *Sales) ProductExists(ctx context.Context, sku string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var exists bool
	if err := s.db.QueryRow(ctx, productExistsSQL, sku).Scan(&exists); err != nil {
		return false, fmt.Errorf("product %s: %w", sku, err)
	}
	return exists, nil
}

func (s *Sales) noRound(ctx context.Context, sku string) (StockReport, error) {
	exists, err := s.ProductExists(ctx, sku)
	if err != nil {
		return StockReport{}, unavailable("product", err)
	}
	if !exists {
		return StockReport{}, ErrProductNotFound
	}
	return StockReport{SKU: sku}, nil
}

func report(sku string, r LiveRound, confirmed int64) StockReport {
	round := r.Round
	return StockReport{
		SKU: sku, Quantity: r.Quantity, Available: r.Available, Sold: r.Quantity - r.Available,
		Confirmed: confirmed, Released: r.Released, PerUserLimit: r.PerUserLimit,
		StartsAt: timePtr(r.StartsAt), EndsAt: timePtr(r.EndsAt), RoundID: &round,
	}
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// unavailable reports a store outage (database.Unavailable) as a 503 and
// keeps the cause for logs; any other error is a bug, left for the 500
// handler to log.
func unavailable(op string, err error) error {
	return database.Wrap(op, api.Unavailable("the store is unavailable"), err)
}

// addSoldSQL updates rounds in id order, so concurrent writers lock them in
// the same order and cannot deadlock. The CHECK (sold <= quantity +
// released_seen) on sale_rounds is the last guard against oversell.
const addSoldSQL = `
UPDATE sale_rounds AS r SET sold = r.sold + d.qty, released_seen = greatest(r.released_seen, d.released)
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS d(round_id, qty, released)
WHERE r.id = d.round_id`

// Sold is what a batch of persisted orders adds to one round: its units,
// and the most units the round had given back (Released, see the live
// stock format) when any of those orders was reserved. Units given back
// can be sold again, so the round may sell quantity + Released in all.
type Sold struct {
	Units    int64
	Released int64
}

// RecordSold adds units (round id -> what was sold) to the rounds' sold
// counts in the caller's transaction, so that the orders and the counts
// they add to commit together. A round over its quantity plus the units it
// had given back fails the CHECK (SQLSTATE 23514): the transaction cannot
// commit.
func RecordSold(ctx context.Context, tx pgx.Tx, units map[int64]Sold) error {
	if len(units) == 0 {
		return nil
	}
	rounds := slices.Sorted(maps.Keys(units))
	qtys, released := make([]int64, len(rounds)), make([]int64, len(rounds))
	for i, r := range rounds {
		qtys[i], released[i] = units[r].Units, units[r].Released
	}
	if _, err := tx.Exec(ctx, addSoldSQL, rounds, qtys, released); err != nil {
		return fmt.Errorf("add to sold counts: %w", err)
	}
	return nil
}
