package catalogtest

import (
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkGetProductCached measures GET /api/v1/products/{sku} through the
// whole Fiber app (middleware, handler, cache hit, live stock read) against
// the real Redis, without a network listener. Results: BENCHMARKS.md.
func BenchmarkGetProductCached(b *testing.B) {
	r := testenvStores(b)
	in := newInstance(b, r)
	in.create(b, "bench-1", "c", 1999)
	if res := in.do(b, http.MethodGet, "/api/v1/products/bench-1", ""); res.status != http.StatusOK {
		b.Fatalf("warm-up: %d %s", res.status, res.body)
	}
	h := in.app.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(http.MethodGet)
		ctx.Request.SetRequestURI("/api/v1/products/bench-1")
		h(&ctx)
		if ctx.Response.StatusCode() != http.StatusOK {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	b.StopTimer()
	if hits := in.metric(b, "shop_cache_requests_total", "result", "hit"); hits < float64(b.N) {
		b.Fatalf("hits = %v for %d reads: not served from the cache", hits, b.N)
	}
}
