package bestseller

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkRecord measures what the writer's after-commit hook costs per
// persisted order: Record of batches of 100 new orders of two lines each
// (the counted-marks check and the ZINCRBYs of four periods, in one script
// per batch), against the real Redis. Reported per order, with
// redis-us/order: the time the scripts held Redis (INFO commandstats),
// which every purchase arriving meanwhile waits out.
func BenchmarkRecord(b *testing.B) {
	r := testenv.NewRedis(b)
	s := New(r.Client, nil, nil, lock.New(r.Client, r.Prefix), r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	const batch = 100
	orders := make([]Order, batch)
	ctx := context.Background()
	before := scriptMicros(b, r.Client)
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
	b.StopTimer()
	b.ReportMetric(float64(scriptMicros(b, r.Client)-before)/float64(b.N), "redis-us/order")
}

// scriptMicros is the microseconds Redis has spent in EVALSHA, as INFO
// commandstats counts them.
func scriptMicros(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	_, rest, ok := strings.Cut(info, "cmdstat_evalsha:")
	if !ok {
		return 0
	}
	_, rest, _ = strings.Cut(rest, "usec=")
	n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
