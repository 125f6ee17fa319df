package writer

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkWriterDrain measures how fast one order writer, with the options
// `shop serve` and `shop writer` use by default (batches of 1000, three in
// flight), empties a stream of b.N orders into PostgreSQL: the
// stream is filled through the reserve script first (not timed), then the
// writer runs until every entry is acknowledged. One op is one order; the
// orders/s metric is the drain rate. Run it with a fixed count, e.g.
// -benchtime 200000x. Results: BENCHMARKS.md.
func BenchmarkWriterDrain(b *testing.B) {
	ctx := context.Background()
	db, r := testenv.NewDatabase(b), testenv.NewRedis(b)
	stock := inventory.NewStock(r.Client, r.Prefix)
	svc := order.New(db.Pool, r.Client, stock, nil, r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), order.Options{})
	users := benchUsers(b, db.Pool, 100)
	openSale(b, db.Pool, stock, r, "drain", 1<<30, 0, 100)
	fillStream(b, svc, users, "drain", b.N)

	w := New(db.Pool, r.Client, r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), Options{Consumer: "bench", Batch: 1000, Concurrency: 3})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { done <- w.Run(wctx) }()
	waitDrained(b, r)
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&rows); err != nil || rows != b.N {
		b.Fatalf("%d order rows for %d orders (%v)", rows, b.N, err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "orders/s")
}

// benchUsers inserts n users (orders reference them) and returns their ids.
func benchUsers(b *testing.B, db *pgxpool.Pool, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		_, err := db.Exec(context.Background(),
			`INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, ids[i], ids[i]+"@example.com")
		if err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// fillStream places n orders of sku, spread over users, from 32 goroutines.
func fillStream(b *testing.B, svc *order.Service, users []string, sku string, n int) {
	b.Helper()
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				_, err := svc.Place(context.Background(), users[i%len(users)], []order.Line{{SKU: sku, Quantity: 1}}, order.PlaceOptions{})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// waitDrained waits until the group has read and acknowledged everything.
func waitDrained(b *testing.B, r *testenv.Redis) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		groups, err := r.Client.XInfoGroups(context.Background(), newKeys(r.Prefix, keyspace.Partitions{}).stream(0)).Result()
		if err == nil && len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatal("stream not drained within 5 minutes")
}
