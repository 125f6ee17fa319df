package writer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shop-oss/shop/internal/inventory"
)

// The SQL the writer runs, one transaction per batch. Arrays and unnest
// keep it to one statement per table whatever the batch size.
const (
	insertOrdersSQL = `
INSERT INTO orders (id, user_id, total_cents, stream_id, created_at, expires_at)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::timestamptz[], $6::timestamptz[])
ON CONFLICT (id) DO NOTHING
RETURNING id`

	insertItemsSQL = `
INSERT INTO order_items (order_id, sku, round_id, quantity, price_cents)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::int[], $5::bigint[])`
)

// persist writes the events in one transaction and returns the ones it
// inserted and the ones whose rows existed already (events already written
// insert nothing: redelivery is harmless). Only what it inserted is added to the rounds' sold counts, in
// inventory's function, inside this transaction. beforeCommit, when set,
// runs just before COMMIT (fault injection).
func persist(ctx context.Context, db beginner, events []event, beforeCommit func() error) (fresh, existing []event, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	inserted, err := insertOrders(ctx, tx, events)
	if err != nil {
		return nil, nil, err
	}
	fresh = make([]event, 0, len(inserted))
	for _, e := range events {
		if inserted[e.orderID] {
			fresh = append(fresh, e)
		} else {
			existing = append(existing, e)
		}
	}
	if err := insertItems(ctx, tx, fresh); err != nil {
		return nil, nil, err
	}
	if err := inventory.RecordSold(ctx, tx, soldUnits(fresh)); err != nil {
		return nil, nil, err
	}
	if beforeCommit != nil {
		if err := beforeCommit(); err != nil {
			return nil, nil, hookError{err}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, commitError{err}
	}
	return fresh, existing, nil
}

// commitError: COMMIT was sent and its answer did not come back as a
// success. Its outcome is unknown: the transaction may have committed
// (the answer was lost on the way back).
type commitError struct{ err error }

func (c commitError) Error() string { return "commit: " + c.err.Error() }
func (c commitError) Unwrap() error { return c.err }

type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

func insertOrders(ctx context.Context, tx pgx.Tx, events []event) (map[uuid.UUID]bool, error) {
	n := len(events)
	ids, users := make([]pgtype.UUID, n), make([]pgtype.UUID, n)
	totals, streamIDs := make([]int64, n), make([]string, n)
	created, expires := make([]time.Time, n), make([]pgtype.Timestamptz, n)
	for i, e := range events {
		ids[i], users[i] = pgUUID(e.orderID), pgUUID(e.userID)
		totals[i], streamIDs[i], created[i] = e.totalCents, e.streamID, e.createdAt
		expires[i] = pgtype.Timestamptz{Time: e.expiresAt, Valid: !e.expiresAt.IsZero()}
	}
	rows, err := tx.Query(ctx, insertOrdersSQL, ids, users, totals, streamIDs, created, expires)
	if err != nil {
		return nil, fmt.Errorf("insert orders: %w", err)
	}
	inserted := make(map[uuid.UUID]bool, n)
	for rows.Next() {
		var id pgtype.UUID
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("insert orders: %w", err)
		}
		inserted[id.Bytes] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert orders: %w", err)
	}
	return inserted, nil
}

// pgUUID passes a UUID to pgx in its native form. A uuid.UUID would go
// through its driver.Valuer (a string, parsed again, after a failed
// encode attempt that builds an error per element): that was the writer's
// biggest CPU cost (BENCHMARKS.md).
func pgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

func insertItems(ctx context.Context, tx pgx.Tx, events []event) error {
	var orders []pgtype.UUID
	var skus []string
	var rounds, prices []int64
	var qtys []int32
	for _, e := range events {
		for _, it := range e.items {
			orders = append(orders, pgUUID(e.orderID))
			skus = append(skus, it.SKU)
			rounds = append(rounds, it.RoundID)
			qtys = append(qtys, int32(it.Quantity))
			prices = append(prices, it.PriceCents)
		}
	}
	if len(orders) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, insertItemsSQL, orders, skus, rounds, qtys, prices); err != nil {
		return fmt.Errorf("insert order items: %w", err)
	}
	return nil
}

// soldUnits sums the events' units by sale round, with the most units each
// round had given back when one of them was reserved.
func soldUnits(events []event) map[int64]inventory.Sold {
	sold := map[int64]inventory.Sold{}
	for _, e := range events {
		for _, it := range e.items {
			s := sold[it.RoundID]
			s.Units += int64(it.Quantity)
			s.Released = max(s.Released, it.Released)
			if it.Buckets > 1 {
				if s.Buckets == nil {
					s.Buckets = map[int]int64{}
				}
				b := inventory.HomeBucket(e.userID.String(), it.Buckets) // the bucket it was taken from
				s.Buckets[b] = max(s.Buckets[b], it.Released)
			}
			sold[it.RoundID] = s
		}
	}
	return sold
}

// permanent reports whether a database error will happen again however
// often the same events are retried: a constraint or data error (the round
// is full, a row references nothing). Everything else is retried as it
// is: an outage (outage.Is: connection loss, timeouts, a server
// shutting down), a serialization failure or deadlock, and anything else,
// which the writer logs as an error since it is likely a bug.
func permanent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23": // data exception, integrity constraint violation
		return true
	}
	return false
}
