package order

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkSweeperExpiry measures how fast one sweeper expires due
// orders: b.N one-unit orders are placed with a 1 ms payment window (not
// timed), then one Sweep (batches of 100, the default) expires them all:
// each is a status read and the guarded release with its outbox entry.
// One op is one order; releases/s is the sweeper's throughput. Run it with
// a fixed count, e.g. -benchtime 20000x. Results: BENCHMARKS.md.
func BenchmarkSweeperExpiry(b *testing.B) {
	db, r := testenv.NewDatabase(b), testenv.NewRedis(b)
	stock := inventory.NewStock(r.Client, r.Prefix)
	log := slog.New(slog.DiscardHandler)
	svc := New(db.Pool, r.Client, stock, nil, r.Prefix, log, prometheus.NewRegistry(), Options{PaymentTTL: time.Millisecond})
	users := benchUsers(b, svc, 100)
	openSale(b, db.Pool, stock, r, "sweep", 1<<30, 0, 100)
	fillStream(b, svc, users, "sweep", b.N)
	time.Sleep(10 * time.Millisecond)
	sw := NewSweeper(r.Client, stock, r.Prefix, log, prometheus.NewRegistry(), SweeperOptions{})

	b.ResetTimer()
	start := time.Now()
	n, err := sw.Sweep(context.Background())
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil || n != b.N {
		b.Fatalf("expired %d of %d: %v", n, b.N, err)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "releases/s")
}
