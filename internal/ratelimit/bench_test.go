package ratelimit_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkAllow measures one limiter decision on the allowed path, spread
// over many client addresses as in a flash sale.
func BenchmarkAllow(b *testing.B) {
	r := testenv.NewRedis(b)
	l := ratelimit.New(r.Client, r.Prefix, 100, 10*time.Second)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(25) // 50 callers on 2 cores, like redis-benchmark -c 50
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ip := "10.0." + strconv.FormatInt(n.Add(1)%50000, 10)
			if _, err := l.Allow(context.Background(), ip); err != nil {
				b.Fatal(err)
			}
		}
	})
}
