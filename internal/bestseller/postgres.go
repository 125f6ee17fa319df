package bestseller

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The rebuild's SQL, run in one read-only REPEATABLE READ transaction so
// that the totals and the recent orders come from the same snapshot.
//
// Cancelled, expired and refunded orders (a row in the order package's
// order_transitions) are left out of the totals: they were taken back from
// the boards.
const (
	released = `EXISTS (SELECT 1 FROM order_transitions t
        WHERE t.order_id = o.id AND t.status IN ('cancelled', 'expired', 'refunded'))`

	// totalsSQL sums each SKU's units per period in one scan: $1..$6 are
	// the day, week and month bounds [start, end).
	totalsSQL = `
SELECT i.sku,
       coalesce(sum(i.quantity) FILTER (WHERE o.created_at >= $1 AND o.created_at < $2), 0)::bigint,
       coalesce(sum(i.quantity) FILTER (WHERE o.created_at >= $3 AND o.created_at < $4), 0)::bigint,
       coalesce(sum(i.quantity) FILTER (WHERE o.created_at >= $5 AND o.created_at < $6), 0)::bigint,
       sum(i.quantity)::bigint
FROM order_items i JOIN orders o ON o.id = i.order_id
WHERE NOT ` + released + `
GROUP BY i.sku`

	// recentSQL lists the orders whose after-commit hook may not have run
	// yet ($1 is recentWindow), and those whose take-back may not have:
	// released is true for those (cancelled or expired, recorded lately).
	recentSQL = `
SELECT o.id::text, o.created_at, false FROM orders o
WHERE o.confirmed_at >= now() - $1::interval AND NOT ` + released + `
UNION ALL
SELECT o.id::text, o.created_at, true FROM order_transitions t JOIN orders o ON o.id = t.order_id
WHERE t.status IN ('cancelled', 'expired', 'refunded') AND t.recorded_at >= now() - $1::interval`
)

// snapshot is what a rebuild read from PostgreSQL.
type snapshot struct {
	// totals[i] are the units per SKU of Periods[i].
	totals [4]map[string]int64
	recent []recentOrder
}

// recentOrder is an order whose hooks may still come: counted by the
// snapshot, or (released) already left out of it.
type recentOrder struct {
	Order    // ID and At only
	released bool
}

func (s *Service) readSnapshot(ctx context.Context, now time.Time) (snapshot, error) {
	var snap snapshot
	err := pgx.BeginTxFunc(ctx, s.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			if snap.totals, err = readTotals(ctx, tx, now); err != nil {
				return err
			}
			snap.recent, err = readRecent(ctx, tx)
			return err
		})
	if err != nil {
		return snapshot{}, fmt.Errorf("read sales: %w", err)
	}
	return snap, nil
}

func readTotals(ctx context.Context, tx pgx.Tx, now time.Time) ([4]map[string]int64, error) {
	var totals [4]map[string]int64
	var bounds []any
	for i, p := range Periods {
		totals[i] = map[string]int64{}
		if p != All {
			_, start, end := p.span(now)
			bounds = append(bounds, start, end)
		}
	}
	rows, err := tx.Query(ctx, totalsSQL, bounds...)
	if err != nil {
		return totals, err
	}
	var sku string
	var units [4]int64
	_, err = pgx.ForEachRow(rows, []any{&sku, &units[0], &units[1], &units[2], &units[3]}, func() error {
		for i, u := range units {
			if u > 0 {
				totals[i][sku] = u
			}
		}
		return nil
	})
	return totals, err
}

func readRecent(ctx context.Context, tx pgx.Tx) ([]recentOrder, error) {
	rows, err := tx.Query(ctx, recentSQL, recentWindow.String())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (recentOrder, error) {
		var o recentOrder
		err := r.Scan(&o.ID, &o.At, &o.released)
		return o, err
	})
}
