package order

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// BenchmarkSweeperExpiry measures how fast one sweeper expires due
// orders: b.N one-unit orders are placed with a 1 ms payment window (not
// timed), then one Sweep (batches of 100, the default) expires them all:
// each is a status read and the guarded release with its outbox entry.
// One op is one order; releases/s is the sweeper's throughput. Run it with
// a fixed count, e.g. -benchtime 20000x. Results: BENCHMARKS.md.
func BenchmarkSweeperExpiry(b *testing.B) {
	e := ordertesting.NewBench(b, "sweep")
	log := slog.New(slog.DiscardHandler)
	svc := New(e.DB.Pool, e.R.Client, e.Stock, nil, e.R.Prefix, log, prometheus.NewRegistry(), Options{PaymentTTL: time.Millisecond})
	fillStream(b, svc, e.Users, "sweep", b.N)
	time.Sleep(10 * time.Millisecond)
	sw := NewSweeper(e.R.Client, e.Stock, e.R.Prefix, log, prometheus.NewRegistry(), SweeperOptions{})

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
