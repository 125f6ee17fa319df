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
