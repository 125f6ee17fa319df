package writer

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkWriterCopy is the order writer's physical limit, the baseline of
// BenchmarkWriterDrain: the same orders and order_items rows COPYed (pgx
// CopyFrom) into the same tables, with their keys, indexes and foreign
// keys, in one transaction. The rows are the writer's own: a stream of b.N
// orders is filled and drained exactly as in BenchmarkWriterDrain (not
// timed), read back, and the tables emptied; only the COPY is timed. Run
// it in the same `go test` as the drain with the same count, e.g.
// -bench 'WriterDrain$|WriterCopy$' -benchtime 200000x; make bench prints
// drain / COPY. Results: BENCHMARKS.md.
func BenchmarkWriterCopy(b *testing.B) {
	ctx := context.Background()
	e := filledBench(b, "copy")
	drainOnce(b, e.DB, e.R)
	orders, items := writtenRows(b, e.DB)
	if len(orders) != b.N {
		b.Fatalf("%d order rows for %d orders", len(orders), b.N)
	}
	if _, err := e.DB.Pool.Exec(ctx, `TRUNCATE order_items, orders`); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	start := time.Now()
	copyRows(b, e.DB, orders, items)
	elapsed := time.Since(start)
	b.StopTimer()
	var n int
	if err := e.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil || n != b.N {
		b.Fatalf("%d order rows after COPY for %d orders (%v)", n, b.N, err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "orders/s")
	b.ReportMetric(float64(len(orders)+len(items))/elapsed.Seconds(), "rows/s")
}

// drainOnce runs a writer with BenchmarkWriterDrain's options until the
// stream is empty.
func drainOnce(b *testing.B, db *testenv.Database, r *testenv.Redis) {
	b.Helper()
	w := New(db.Pool, r.Client, r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), Options{Consumer: "bench", Batch: 1000, Concurrency: 3})
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	waitDrained(b, r)
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// The columns the writer inserts (persist.go); the others take their
// defaults, as they do for the writer.
var (
	orderColumns = []string{"id", "user_id", "total_cents", "stream_id", "created_at"}
	itemColumns  = []string{"order_id", "sku", "round_id", "quantity", "price_cents"}
)

// writtenRows reads back what the writer inserted, column for column.
func writtenRows(b *testing.B, db *testenv.Database) (orders, items [][]any) {
	b.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT id, user_id, total_cents, stream_id, created_at FROM orders`)
	if err != nil {
		b.Fatal(err)
	}
	orders, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) {
		var id, user pgtype.UUID
		var total int64
		var stream string
		var created time.Time
		err := row.Scan(&id, &user, &total, &stream, &created)
		return []any{id, user, total, stream, created}, err
	})
	if err != nil {
		b.Fatal(err)
	}
	rows, err = db.Pool.Query(ctx, `SELECT order_id, sku, round_id, quantity, price_cents FROM order_items`)
	if err != nil {
		b.Fatal(err)
	}
	items, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) {
		var order pgtype.UUID
		var sku string
		var round, price int64
		var qty int32
		err := row.Scan(&order, &sku, &round, &qty, &price)
		return []any{order, sku, round, qty, price}, err
	})
	if err != nil {
		b.Fatal(err)
	}
	return orders, items
}

// copyRows COPYs the orders, then their items, in one transaction.
func copyRows(b *testing.B, db *testenv.Database, orders, items [][]any) {
	b.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"orders"}, orderColumns, pgx.CopyFromRows(orders)); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"order_items"}, itemColumns, pgx.CopyFromRows(items))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}
