package writer

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shop-oss/shop/internal/order"
)

// insertTransitionsSQL records final states, first one wins: a
// redelivered transition inserts nothing (order_transitions' primary key).
// The one exception is a refund, which follows the payment it undoes
// (migration 00013): paid becomes refunded, keeping the payment's time in
// at, whichever of the two is recorded first.
const insertTransitionsSQL = `
INSERT INTO order_transitions AS t (order_id, status, at, payment_ref, stream_id, refunded_at)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::timestamptz[])
ON CONFLICT (order_id) DO UPDATE SET status = 'refunded',
    at = CASE WHEN EXCLUDED.status = 'paid' THEN EXCLUDED.at ELSE t.at END,
    payment_ref = coalesce(nullif(t.payment_ref, ''), EXCLUDED.payment_ref),
    refunded_at = coalesce(t.refunded_at, EXCLUDED.refunded_at),
    stream_id = CASE WHEN EXCLUDED.status = 'refunded' THEN EXCLUDED.stream_id ELSE t.stream_id END,
    recorded_at = CASE WHEN EXCLUDED.status = 'refunded' THEN now() ELSE t.recorded_at END
WHERE (t.status = 'paid' AND EXCLUDED.status = 'refunded')
   OR (t.status = 'refunded' AND EXCLUDED.status = 'paid' AND t.at = t.refunded_at)`

// transitionRow is one order's row of insertTransitionsSQL.
type transitionRow struct {
	Transition
	refundedAt pgtype.Timestamptz
}

// transitionRows gives each order one row: a statement may not update a
// row twice, and a batch may hold an order's payment and its refund (or a
// transition delivered twice). The first of an order's transitions
// stands, merged with its refund when it is the payment.
func transitionRows(ts []Transition) []transitionRow {
	var rows []transitionRow
	at := map[string]int{}
	for _, t := range ts {
		i, seen := at[t.OrderID]
		if !seen {
			at[t.OrderID] = len(rows)
			rows = append(rows, transitionRow{Transition: t})
			i = len(rows) - 1
		}
		rows[i] = merged(rows[i], t, seen)
	}
	return rows
}

// merged adds transition t of r's order to r (t is r's own when first).
func merged(r transitionRow, t Transition, seen bool) transitionRow {
	switch {
	case t.Status == order.StatusRefunded && !seen:
		r.refundedAt = pgtype.Timestamptz{Time: t.At, Valid: true}
	case t.Status == order.StatusRefunded && r.Status == order.StatusPaid:
		r.Status, r.streamID, r.refundedAt = t.Status, t.streamID, pgtype.Timestamptz{Time: t.At, Valid: true}
	case t.Status == order.StatusPaid && r.Status == order.StatusRefunded && r.At.Equal(r.refundedAt.Time):
		r.At, r.PaymentRef = t.At, cmp.Or(r.PaymentRef, t.PaymentRef)
	}
	return r
}

// recordTransitions writes the transitions in one statement (its own
// transaction: each row stands alone, and a row for an order not written
// yet is fine, see the migration).
func recordTransitions(ctx context.Context, db beginner, ts []Transition) error {
	rows := transitionRows(ts)
	n := len(rows)
	ids, statuses, refunded := make([]pgtype.UUID, n), make([]string, n), make([]pgtype.Timestamptz, n)
	at, refs, streamIDs := make([]time.Time, n), make([]string, n), make([]string, n)
	for i, t := range rows {
		if err := ids[i].Scan(t.OrderID); err != nil {
			return fmt.Errorf("record transition %s: %w", t.OrderID, err)
		}
		statuses[i], at[i], refs[i], streamIDs[i], refunded[i] = t.Status, t.At, t.PaymentRef, t.streamID, t.refundedAt
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, insertTransitionsSQL, ids, statuses, at, refs, streamIDs, refunded); err != nil {
		return fmt.Errorf("record transitions: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transitions: %w", err)
	}
	return nil
}
