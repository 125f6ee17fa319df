package order

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
)

// BenchmarkReserve measures the reserve-and-enqueue script round trip on
// the buy path (every call succeeds: stock never runs out, no limit).
func BenchmarkReserve(b *testing.B) {
	f := newBenchFixture(b)
	reserveParallel(b, f, nil)
}

// BenchmarkReserveEvents is the purchase path's cost of publishing the
// stock change, on the same Redis in the same run: "off" publishes
// nothing; "in_script" is what ships, the PUBLISH inside the reserve
// script; "async_queue" publishes from a bounded queue after the script
// (one goroutine, PUBLISH of the SKU's state per purchase, dropped when
// full). Two pattern subscribers (two instances) drain the channel in the
// two publishing cases, so the messages are really delivered.
func BenchmarkReserveEvents(b *testing.B) {
	for _, mode := range []string{"off", "in_script", "async_queue"} {
		b.Run(mode, func(b *testing.B) {
			f := newBenchFixture(b)
			after := func(string) {}
			if mode != "off" {
				drainChanges(b, f)
			}
			if mode != "in_script" {
				f.svc.quiet = true
			}
			if mode == "async_queue" {
				after = asyncPublisher(b, f)
			}
			reserveParallel(b, f, after)
		})
	}
}

// drainChanges subscribes twice to the changes pattern and reads every
// message until b ends.
func drainChanges(b *testing.B, f *reserveFixture) {
	for range 2 {
		ps := f.r.Client.PSubscribe(context.Background(), f.ChangesPattern())
		if _, err := ps.Receive(context.Background()); err != nil {
			b.Fatal(err)
		}
		ch := ps.Channel()
		go func() {
			for range ch {
			}
		}()
		b.Cleanup(func() { _ = ps.Close() })
	}
}

// asyncPublisher is the alternative to publishing in the script: a
// bounded queue and one goroutine that reads the SKU's state and
// publishes it (two round trips per change, outside the purchase).
func asyncPublisher(b *testing.B, f *reserveFixture) func(string) {
	q := make(chan string, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		for sku := range q {
			avail, err := f.Available(ctx, sku)
			if err != nil {
				continue
			}
			f.r.Client.Publish(ctx, f.ChangesChannel(sku), "1 "+strconv.FormatInt(avail[0], 10)+" 0 0")
		}
	}()
	b.Cleanup(func() { close(q); <-done })
	return func(sku string) {
		select {
		case q <- sku:
		default: // full: the change is dropped, as Pub/Sub may drop it
		}
	}
}

// newBenchFixture is a reserveFixture with a round of "bench" open that
// no benchmark runs out of.
func newBenchFixture(b *testing.B) *reserveFixture {
	b.Helper()
	f := newReserveFixture(b)
	if err := f.OpenRound(context.Background(), "bench", inventory.LiveRound{Round: 1, Quantity: 1 << 40, PriceCents: 100}); err != nil {
		b.Fatal(err)
	}
	return f
}

// reserveParallel times b.N reserves of a unit of "bench", each by a new
// buyer, from 50 callers (on 2 cores, like redis-benchmark -c 50),
// calling after, when set, after each.
func reserveParallel(b *testing.B, f *reserveFixture, after func(sku string)) {
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(25)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := "u" + strconv.FormatInt(n.Add(1), 10)
			if _, err := f.svc.reserve(context.Background(), f.enqueue(u, ""), []Line{{"bench", 1}}); err != nil {
				b.Fatal(err)
			}
			if after != nil {
				after("bench")
			}
		}
	})
}

// BenchmarkReserveBuckets is a buy-now of one SKU whose round is split
// over 1, 4 and 16 stock buckets on a single Redis, in the same run
// (issue 49: buckets on one Redis cost at most a tenth): the whole
// placement (home bucket, with the moves a dry home needs), and, as
// work counters a noisy host cannot blur, the Redis core-µs and commands
// per purchase (INFO cpu and commandstats over the run; run it alone on
// its Redis).
func BenchmarkReserveBuckets(b *testing.B) {
	for _, buckets := range []int{1, 4, 16} {
		b.Run(strconv.Itoa(buckets), func(b *testing.B) {
			f := newReserveFixture(b)
			if err := f.OpenRound(context.Background(), "bench", inventory.LiveRound{Round: 1, Quantity: 1 << 40, PriceCents: 100,
				Buckets: buckets}); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			cpu0, cmds0 := redisWork(b, f)
			b.ReportAllocs()
			b.SetParallelism(25)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					u := "u" + strconv.FormatInt(n.Add(1), 10)
					if _, err := f.svc.Place(context.Background(), u, []Line{{"bench", 1}}, PlaceOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.StopTimer()
			cpu1, cmds1 := redisWork(b, f)
			b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-core-µs/op")
			b.ReportMetric(float64(cmds1-cmds0)/float64(b.N), "redis-cmds/op")
		})
	}
}

// redisWork is the fixture's Redis CPU seconds (user + sys) and command
// calls so far.
func redisWork(b *testing.B, f *reserveFixture) (float64, int64) {
	ctx := context.Background()
	info, err := f.r.Client.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var cpu float64
	var calls int64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			x, _ := strconv.ParseFloat(v, 64)
			cpu += x
		case strings.HasPrefix(k, "cmdstat_"):
			c, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			x, _ := strconv.ParseInt(c, 10, 64)
			calls += x
		}
	}
	return cpu, calls
}
