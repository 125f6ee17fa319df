package writer

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// BenchmarkPersist is the writer's PostgreSQL transaction alone (persist:
// the orders, their items and the rounds' sold counts), without Redis:
// b.N orders of one line each, in batches of 1000 written one after the
// other, as one writer loop writes them. One op is one order. Compare it
// with BenchmarkWriterCopy (the same rows by COPY in one transaction) to
// see what the batches cost apart from the stream; BENCHMARKS.md has the
// variants measured against it (staging tables, one statement, COPY).
func BenchmarkPersist(b *testing.B) {
	e := ordertesting.NewBench(b, "persist")
	now := time.Now().UTC().Truncate(time.Millisecond)
	events := make([]event, b.N)
	for i := range events {
		events[i] = event{streamID: "1-1", orderID: uuid.New(), userID: uuid.MustParse(e.Users[i%len(e.Users)]),
			createdAt: now, totalCents: 100, items: []order.ReservedItem{{SKU: "persist", Quantity: 1, PriceCents: 100, RoundID: e.Round}}}
	}
	const batch = 1000
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += batch {
		fresh, _, err := persist(context.Background(), e.DB.Pool, events[i:min(i+batch, b.N)], nil)
		if err != nil || len(fresh) != min(batch, b.N-i) {
			b.Fatalf("persist: %d fresh, %v", len(fresh), err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
}
