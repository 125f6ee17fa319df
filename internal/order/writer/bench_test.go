package writer

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/ordertesting"
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
	e := filledBench(b, "drain")
	db, r := e.DB, e.R

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

// filledBench is a Bench whose stream holds b.N orders of sku, placed
// through the order service.
func filledBench(b *testing.B, sku string) *ordertesting.Bench {
	b.Helper()
	e := ordertesting.NewBench(b, sku)
	svc := order.New(e.DB.Pool, e.R.Client, e.Stock, nil, e.R.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), order.Options{})
	fillStream(b, svc, e.Users, sku, b.N)
	return e
}

// fillStream places n orders of sku, spread over users, from 32 goroutines.
func fillStream(b *testing.B, svc *order.Service, users []string, sku string, n int) {
	b.Helper()
	ordertesting.Fill(b, n, func(i int) error {
		_, err := svc.Place(context.Background(), users[i%len(users)], []order.Line{{SKU: sku, Quantity: 1}}, order.PlaceOptions{})
		return err
	})
}

// waitDrained waits until the group has read and acknowledged everything.
func waitDrained(b *testing.B, r *testenv.Redis) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		groups, err := r.Client.XInfoGroups(context.Background(), orderkey.New(r.Prefix, keyspace.Partitions{}).Stream(0)).Result()
		if err == nil && len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatal("stream not drained within 5 minutes")
}
