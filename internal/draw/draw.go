// Package draw runs the rounds that are draws: shoppers enter with their
// payment authorised, and at the close the units go to entrants ranked
// from the round's committed seed, the winners' authorisations captured
// and the others' cancelled. Entries and the draw's progress live in
// PostgreSQL only, so any instance can resume a draw where the rows say it
// stopped. Design: docs/design/draws.md.
package draw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/outage"
)

// Entry states (docs/api.md).
const (
	StateAuthorizing = "authorizing"
	StateEntered     = "entered"
	StateWon         = "won"
	StateLost        = "lost"
	StateWithdrawn   = "withdrawn"
	StateFailed      = "failed"
)

// Errors of the entry routes.
var (
	ErrNotOpen        = apperr.NewError(apperr.CodeSaleNotActive, "the product has no open draw")
	ErrAlreadyEntered = apperr.NewError(apperr.CodeAlreadyEntered, "you already hold an entry in this draw")
	ErrClosed         = apperr.NewError(apperr.CodeDrawClosed, "the draw is closed")
	ErrNoDraw         = apperr.NewError(apperr.CodeNotFound, "the product has no draw")
	ErrNoEntry        = apperr.NewError(apperr.CodeNotFound, "you have no entry in this draw")
	ErrNotClosable    = apperr.NewError(apperr.CodeConflict, "the product has no open draw to close")
)

// dbTimeout bounds each statement of a request.
const dbTimeout = 3 * time.Second

// Service is the draws: entries, the public answer and the runner.
type Service struct {
	db  *pgxpool.Pool
	pay order.Authorizer
	log *slog.Logger
	// Orders writes a won entry's paid order (nil: none is written).
	orders OrderWriter
	// cancelEvery spaces the cancels of a draw (the provider's rate
	// limit); 0: no pause. pause waits it out (a test counts the pauses).
	cancelEvery time.Duration
	pause       func(ctx context.Context, d time.Duration) error
	metrics     metrics
	// afterCapture, for fault tests, runs after each capture the provider
	// answered and its order was written, before its row is updated; an
	// error stops the draw there, as a crash would.
	afterCapture func(entryID string) error
	// afterAuthorize, for fault tests, runs after the provider answered an
	// entry's authorisation, before it is recorded; an error stops Enter
	// there, as a crash would.
	afterAuthorize func(entryID string) error
	// inserts and authorized write entries' rows in batches (Enter).
	inserts    *batch[newEntry, insertedEntry]
	authorized *batch[authorization, Entry]
}

// OrderWriter turns a won entry into its paid order, exactly once
// whatever the number of calls (the order id is made from the entry's),
// and returns the order's id: order.Service.
type OrderWriter interface {
	PlaceWon(ctx context.Context, w order.Won) (string, error)
}

// Options configure a Service.
type Options struct {
	Orders OrderWriter
	// CancelEvery spaces the draw's cancels (SHOP_DRAW_CANCEL_RATE).
	CancelEvery time.Duration
	// Registry takes the draws' metrics (nil: none registered).
	Registry prometheus.Registerer
}

// New returns the draws on db, with pay taking the authorisations.
func New(db *pgxpool.Pool, pay order.Authorizer, log *slog.Logger, o Options) *Service {
	s := &Service{db: db, pay: pay, log: log, orders: o.Orders, cancelEvery: o.CancelEvery, pause: sleep,
		metrics: newMetrics(o.Registry)}
	s.inserts = newBatch("draw: insert entries", entryBatchSize, entryFlushers, s.insertEntries)
	s.authorized = newBatch("draw: record authorisations", entryBatchSize, entryFlushers, s.recordAuthorizations)
	return s
}

// sleep waits d, or less when ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// InjectAfterCapture makes the runner call f after each capture, before
// recording it (fault drills and tests); set it before the runner runs.
func (s *Service) InjectAfterCapture(f func(entryID string) error) { s.afterCapture = f }

// InjectAfterAuthorize makes Enter call f once the provider answered an
// entry's authorisation, before recording it (fault drills and tests).
func (s *Service) InjectAfterAuthorize(f func(entryID string) error) { s.afterAuthorize = f }

// round is a SKU's current round as the draws read it.
type round struct {
	id, quantity, price int64
	limit               int
	startsAt, closesAt  time.Time
	seed, state         string // state: the stored draw_state, '' when not a draw
	winnersSHA          string
	now                 time.Time // PostgreSQL's, one clock for every instance
}

func (r round) isDraw() bool { return r.state != "" }

// publicState is the draw's state as reported.
func (r round) publicState() string {
	return inventory.DrawStateAt(r.state, r.startsAt, r.closesAt, r.now)
}

const currentRoundSQL = `
SELECT r.id, r.quantity, r.price_cents, r.per_user_limit, r.starts_at, r.draw_closes_at,
       coalesce(r.draw_seed, ''), coalesce(r.draw_state, ''), coalesce(r.draw_winners_sha256, ''), now()
FROM sale_rounds r WHERE r.sku = $1 AND r.opened_at IS NOT NULL ORDER BY r.id DESC LIMIT 1`

const productExistsSQL = `SELECT EXISTS (SELECT 1 FROM products WHERE sku = $1)`

// current reads sku's live round; found is false when it has none (err
// nil): the caller tells a missing product from one without a round.
func (s *Service) current(ctx context.Context, sku string) (r round, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var starts, closes *time.Time
	err = s.db.QueryRow(ctx, currentRoundSQL, sku).Scan(&r.id, &r.quantity, &r.price, &r.limit, &starts, &closes,
		&r.seed, &r.state, &r.winnersSHA, &r.now)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, false, nil
	case err != nil:
		return r, false, unavailable("sale round", err)
	}
	if starts != nil {
		r.startsAt = starts.UTC()
	}
	if closes != nil {
		r.closesAt = closes.UTC()
	}
	return r, true, nil
}

// drawOf reads sku's current round when it is a draw. Errors:
// order.ErrProductNotFound, noDraw (the product has none), or a 503.
func (s *Service) drawOf(ctx context.Context, sku string, noDraw error) (round, error) {
	r, found, err := s.current(ctx, sku)
	if err != nil {
		return r, err
	}
	if !found {
		var exists bool
		if err := s.db.QueryRow(ctx, productExistsSQL, sku).Scan(&exists); err != nil {
			return r, unavailable("product", err)
		}
		if !exists {
			return r, order.ErrProductNotFound
		}
		return r, noDraw
	}
	if !r.isDraw() {
		return r, noDraw
	}
	return r, nil
}

// unavailable reports a store outage as a 503, keeping the cause.
func unavailable(op string, err error) error {
	return outage.Wrap(op, apperr.Unavailable("the store is unavailable"), err)
}

func errorf(op string, err error) error { return fmt.Errorf("draw: %s: %w", op, err) }
