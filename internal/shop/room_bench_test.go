package shop_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// BenchmarkRoom is what waiting costs next to a product read, in one
// run on one application (shop serve's wiring, the access log batched,
// the admitter running): GET /api/v1/products/{sku} anonymous, and by
// a signed-in shopper (op=product-signed-in, for context); POST
// .../queue, a repeat join of one of 200 shoppers already in a room
// admitting 1 a second (200, the same ticket); GET .../queue, their
// ticket read; both worked out from the admitter's turn but for the
// front two. And op=ticket-admitted, the ticket read of 200 shoppers a
// room has admitted; op=ticket-early, of 200 joined before starts_at
// (no position yet); op=ticket-sold-out, of 200 far back in a sold-out
// room; op=ticket-near, of 200 all near the front (a sold-out room
// admitting 1,000 a second), which read Redis; op=join-first, first
// joins before starts_at, each in a fresh room per 1,000 (a shopper's
// first join happens once a round). On a private
// redis-server, with its scripts/op, trips/op (the client's sends) and
// redis-cpu-us/op. The bar: a join and a ticket read each at
// least 0.8 x the product read's throughput. Results: BENCHMARKS.md.
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
	later := time.Now().Add(time.Hour)
	a.Product(b, "early", 100)
	a.Round(b, "early", inventory.Seed{Quantity: 1000, PerUserLimit: 1, StartsAt: later,
		Room: &inventory.RoomSettings{AdmitPerSecond: 1000, PassTTL: inventory.DefaultPassTTL}})
	for sku, rate := range map[string]int{"gone": 1, "near": 1000} {
		a.Product(b, sku, 100)
		a.Round(b, sku, inventory.Seed{Quantity: 0, PerUserLimit: 1,
			Room: &inventory.RoomSettings{AdmitPerSecond: rate, PassTTL: inventory.DefaultPassTTL}})
	}
	bearers := make([]string, benchShoppers)
	for i := range bearers {
		id, tok := a.Shopper(b, fmt.Sprintf("room-%d@example.com", i))
		bearers[i] = "Bearer " + tok
		for _, sku := range []string{"bench", "front", "early", "gone", "near"} {
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
	b.Run("op=product-signed-in", counted(func(b *testing.B) {
		benchRoomOps(b, a, func(n uint64) (string, string, string) {
			return http.MethodGet, "/api/v1/products/bench", bearers[n%benchShoppers]
		})
	}))
	b.Run("op=join", counted(func(b *testing.B) { benchRoom(b, a, http.MethodPost, "bench", bearers) }))
	b.Run("op=ticket", counted(func(b *testing.B) { benchRoom(b, a, http.MethodGet, "bench", bearers) }))
	b.Run("op=ticket-admitted", counted(func(b *testing.B) { benchRoom(b, a, http.MethodGet, "front", bearers) }))
	b.Run("op=ticket-early", counted(func(b *testing.B) { benchRoom(b, a, http.MethodGet, "early", bearers) }))
	b.Run("op=ticket-sold-out", counted(func(b *testing.B) { benchRoom(b, a, http.MethodGet, "gone", bearers) }))
	b.Run("op=ticket-near", counted(func(b *testing.B) { benchRoom(b, a, http.MethodGet, "near", bearers) }))
	newcomers := make([]string, firstJoiners)
	for i := range newcomers {
		_, tok := a.Shopper(b, fmt.Sprintf("first-%d@example.com", i))
		newcomers[i] = "Bearer " + tok
	}
	var rooms atomic.Int64
	b.Run("op=join-first", counted(func(b *testing.B) {
		// A fresh room per firstJoiners joins, opened before the timer.
		skus := make([]string, (b.N+firstJoiners-1)/firstJoiners)
		for i := range skus {
			skus[i] = fmt.Sprintf("first-%d", rooms.Add(1))
			a.Product(b, skus[i], 100)
			a.Round(b, skus[i], inventory.Seed{Quantity: 1000, PerUserLimit: 1, StartsAt: later,
				Room: &inventory.RoomSettings{AdmitPerSecond: 1000, PassTTL: inventory.DefaultPassTTL}})
		}
		benchRoomOps(b, a, func(n uint64) (string, string, string) {
			return http.MethodPost, skus[n/firstJoiners], newcomers[n%firstJoiners]
		})
	}))
}

// firstJoiners is how many shoppers op=join-first's rooms each take.
const firstJoiners = 1000

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
	benchRoomOps(b, a, func(n uint64) (string, string, string) { return method, sku, bearers[n%benchShoppers] })
}

// benchRoomOps runs b.N requests, the nth (from 0) op(n): method, SKU
// (its room's route) or path, and Authorization.
func benchRoomOps(b *testing.B, a *shoptest.App, op func(n uint64) (method, skuOrPath, bearer string)) {
	benchRequests(b, a, func(n uint64) (string, string, string) {
		method, path, bearer := op(n)
		if !strings.HasPrefix(path, "/") {
			path = "/api/v1/products/" + path + "/queue"
		}
		return method, path, bearer
	}, http.StatusOK, http.StatusCreated)
}
