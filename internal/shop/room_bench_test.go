package shop_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// BenchmarkRoom is what waiting costs next to a product read, in one
// run on one application (shop serve's wiring, the access log batched,
// the admitter running): GET /api/v1/products/{sku} anonymous; POST
// .../queue, a repeat join of one of 200 shoppers already in a room
// admitting 1 a second (200, the same ticket); GET .../queue, their
// ticket read; both worked out from the admitter's turn but for the
// front two. And op=ticket-admitted, the ticket read of 200 shoppers a
// room has admitted, which reads Redis (as any near the front does). On
// a private redis-server, with its scripts/op, trips/op (the client's
// sends) and redis-cpu-us/op. The bar: a join and a ticket read
// each at least 0.8 x the product read's throughput. Results:
// BENCHMARKS.md.
func BenchmarkRoom(b *testing.B) {
	rdb := privateRedis(b)
	var sends sendCounter
	rdb.AddHook(&sends)
	a := benchAppWith(b, shoptest.Options{Redis: rdb, Log: accessLogs[1].log(b)}, nil)
	a.Product(b, "bench", 100)
	a.Round(b, "bench", inventory.Seed{Quantity: 1000, PerUserLimit: 1,
		Room: &inventory.RoomSettings{AdmitPerSecond: 1, PassTTL: inventory.DefaultPassTTL}})
	a.Product(b, "front", 100)
	a.Round(b, "front", inventory.Seed{Quantity: 1000, PerUserLimit: 1,
		Room: &inventory.RoomSettings{AdmitPerSecond: 1000, PassTTL: inventory.DefaultPassTTL}})
	bearers := make([]string, benchShoppers)
	for i := range bearers {
		id, tok := a.Shopper(b, fmt.Sprintf("room-%d@example.com", i))
		bearers[i] = "Bearer " + tok
		for _, sku := range []string{"bench", "front"} {
			if _, _, err := a.Rooms.Join(context.Background(), sku, id, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	waitAdmitted(b, a, "front", benchShoppers)
	counted := func(bench func(b *testing.B)) func(b *testing.B) {
		return func(b *testing.B) {
			calls, _ := scriptStats(b, rdb)
			trips := sends.trips.Load()
			cpu := serverCPU(b, rdb)
			bench(b)
			calls2, _ := scriptStats(b, rdb)
			b.ReportMetric(float64(serverCPU(b, rdb)-cpu)/float64(b.N)/1e3, "redis-cpu-us/op")
			b.ReportMetric(float64(calls2-calls)/float64(b.N), "scripts/op")
			b.ReportMetric(float64(sends.trips.Load()-trips)/float64(b.N), "trips/op")
		}
	}
	b.Run("op=product", counted(func(b *testing.B) { benchGet(b, a, "/api/v1/products/bench") }))
	b.Run("op=join", counted(func(b *testing.B) { benchRoom(b, a, http.MethodPost, "bench", bearers) }))
	b.Run("op=ticket", counted(func(b *testing.B) { benchRoom(b, a, http.MethodGet, "bench", bearers) }))
	b.Run("op=ticket-admitted", counted(func(b *testing.B) { benchRoom(b, a, http.MethodGet, "front", bearers) }))
}

// waitAdmitted waits until sku's room has admitted n.
func waitAdmitted(b *testing.B, a *shoptest.App, sku string, n int64) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v, err := a.Rooms.AdminView(context.Background(), sku)
		if err == nil && v.Admitted >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("room %s: %+v %v", sku, v, err)
		}
	}
}

// benchRoom is benchGet for the room's shopper routes.
func benchRoom(b *testing.B, a *shoptest.App, method, sku string, bearers []string) {
	var seq atomic.Uint64
	h := a.Fiber.Handler()
	b.ReportAllocs()
	b.SetParallelism(25)
	defer cpuPerOp(b)()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var rc fasthttp.RequestCtx
		for pb.Next() {
			i := seq.Add(1) % benchShoppers
			rc.ResetUserValues()
			rc.Request.Reset()
			rc.Response.Reset()
			rc.Request.Header.SetMethod(method)
			rc.Request.SetRequestURI("/api/v1/products/" + sku + "/queue")
			rc.Request.Header.Set("Authorization", bearers[i])
			rc.Request.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.0.%d", i+1))
			h(&rc)
			if rc.Response.StatusCode() != http.StatusOK {
				b.Fatalf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
			}
		}
	})
}
