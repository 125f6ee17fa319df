package shoptest

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchShoppers is how many shoppers (and X-Forwarded-For addresses) the
// purchase benchmarks spread over, as make bench does.
const BenchShoppers = 200

// PurchaseBench sets up a sale of SKU "bench" with BenchShoppers shoppers
// and returns the timed loop: b.N purchases of one unit, each with a
// fresh Idempotency-Key, through the whole application as shop serve
// wires it but without a socket, from 50 callers on 2 cores (like
// redis-benchmark -c 50). Every purchase must answer 202. The app must
// trust 0.0.0.0 as a proxy, as app.Handler()'s requests come from there.
func PurchaseBench(b *testing.B, a *App) (run func()) {
	a.Sale(b, "bench", 100, 1<<30, 0)
	bearers, addrs := make([]string, BenchShoppers), make([]string, BenchShoppers)
	for i := range bearers {
		_, tok := a.Shopper(b, fmt.Sprintf("bench-%d@example.com", i))
		bearers[i], addrs[i] = "Bearer "+tok, fmt.Sprintf("198.18.%d.%d", (i+1)/256, (i+1)%256)
	}
	body := []byte(`{"quantity":1}`)
	h := a.Fiber.Handler()
	return func() {
		var seq atomic.Uint64
		b.ReportAllocs()
		b.SetParallelism(25)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var rc fasthttp.RequestCtx
			for pb.Next() {
				n := seq.Add(1)
				i := n % BenchShoppers
				PurchaseRequest(&rc, bearers[i], addrs[i], strconv.FormatUint(n, 36), body)
				h(&rc)
				if rc.Response.StatusCode() != http.StatusAccepted {
					b.Fatalf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
				}
			}
		})
	}
}

// PurchaseRequest makes rc a purchase of one unit of SKU "bench" by the
// shopper bearer ("Bearer <token>") from addr, with Idempotency-Key key,
// resetting it first as fasthttp's server does between requests: without
// that, each request's context would wrap the last one's (UserContext
// lives in the user values), ever deeper.
func PurchaseRequest(rc *fasthttp.RequestCtx, bearer, addr, key string, body []byte) {
	rc.ResetUserValues()
	rc.Request.Reset()
	rc.Response.Reset()
	rc.Request.Header.SetMethod(http.MethodPost)
	rc.Request.SetRequestURI("/api/v1/products/bench/purchase")
	rc.Request.Header.Set("Authorization", bearer)
	rc.Request.Header.Set("Content-Type", "application/json")
	rc.Request.Header.Set("Idempotency-Key", key)
	rc.Request.Header.Set("X-Forwarded-For", addr)
	rc.Request.SetBody(body)
}
