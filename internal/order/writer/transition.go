package writer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// insertTransitionsSQL records final states, first one wins: a
// redelivered transition inserts nothing (order_transitions' primary key).
const insertTransitionsSQL = `
INSERT INTO order_transitions (order_id, status, at, payment_ref, stream_id)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::text[], $5::text[])
ON CONFLICT (order_id) DO NOTHING`

// recordTransitions writes the transitions in one statement (its own
// transaction: each row stands alone, and a row for an order not written
// yet is fine, see the migration).
func recordTransitions(ctx context.Context, db beginner, ts []Transition) error {
	n := len(ts)
	ids, statuses := make([]pgtype.UUID, n), make([]string, n)
	at, refs, streamIDs := make([]time.Time, n), make([]string, n), make([]string, n)
	for i, t := range ts {
		if err := ids[i].Scan(t.OrderID); err != nil {
			return fmt.Errorf("record transition %s: %w", t.OrderID, err)
		}
		statuses[i], at[i], refs[i], streamIDs[i] = t.Status, t.At, t.PaymentRef, t.streamID
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, insertTransitionsSQL, ids, statuses, at, refs, streamIDs); err != nil {
		return fmt.Errorf("record transitions: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transitions: %w", err)
	}
	return nil
}
