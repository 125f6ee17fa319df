package bestseller

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkRecord measures what the writer's after-commit hook costs per
// persisted order: Record of batches of 100 new orders of two lines each
// (the counted-marks check and the ZINCRBYs of four periods, in one script
// per batch), against the real Redis. Reported per order.
func BenchmarkRecord(b *testing.B) {
	r := testenv.NewRedis(b)
	s := New(r.Client, nil, nil, lock.New(r.Client, r.Prefix), r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	const batch = 100
	orders := make([]Order, batch)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		for j := range orders {
			orders[j] = Order{ID: uuid.NewString(), At: time.Now(), Lines: []Line{
				{SKU: "sku-" + strconv.Itoa(j%20), Units: 1}, {SKU: "sku-" + strconv.Itoa(20+j%7), Units: 2},
			}}
		}
		if _, err := s.Record(ctx, orders); err != nil {
			b.Fatal(err)
		}
	}
}
