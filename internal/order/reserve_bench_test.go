package order

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
)

// BenchmarkReserve measures the reserve-and-enqueue script round trip on
// the buy path (every call succeeds: stock never runs out, no limit).
func BenchmarkReserve(b *testing.B) {
	f := newReserveFixture(b)
	if err := f.OpenRound(context.Background(), "bench", inventory.LiveRound{Round: 1, Quantity: 1 << 40, PriceCents: 100}); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(25) // 50 callers on 2 cores, like redis-benchmark -c 50
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := "u" + strconv.FormatInt(n.Add(1), 10)
			if _, err := f.svc.reserve(context.Background(), f.enqueue(u, ""), []Line{{"bench", 1}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
