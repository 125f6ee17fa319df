package onetrip_test

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkAuthenticatedRequest is what every authenticated request pays
// before its handler, through the whole Fiber app (no socket): the rate
// limiter and the session check, with the check riding in the limiter's
// script (as `shop serve` runs) and, for comparison, in a round trip of its
// own (on a client it does not ride on). Results: BENCHMARKS.md.
func BenchmarkAuthenticatedRequest(b *testing.B) {
	r := testenv.NewRedis(b)
	for _, bc := range []struct {
		name string
		rdb  redis.UniversalClient
	}{
		{"one_round_trip", r.Client},
		{"two_round_trips", wrapped{r.Client}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, bc.rdb, r.Prefix+bc.name+":", 1<<30, nil)
			_, token := f.shopper(b, "bench@example.com")
			h := f.app.Handler()
			b.ReportAllocs()
			b.SetParallelism(25) // 50 callers on 2 cores, like redis-benchmark -c 50
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var rc fasthttp.RequestCtx
					rc.Request.Header.SetMethod(http.MethodGet)
					rc.Request.SetRequestURI("/api/v1/me")
					rc.Request.Header.Set(fiber.HeaderAuthorization, "Bearer "+token)
					h(&rc)
					if rc.Response.StatusCode() != http.StatusOK {
						b.Fatalf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
					}
				}
			})
		})
	}
}
