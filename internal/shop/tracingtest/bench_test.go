package tracingtest

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/telemetry"
)

// BenchmarkPurchaseTracing is a purchase through the whole handler (as
// internal/shop's BenchmarkPurchase: 200 shoppers, 50 callers, no
// socket) with tracing off, then on with a 1 % sampler (parent-based, as
// OTEL_TRACES_SAMPLER=parentbased_traceidratio and its argument 0.01
// make it) and a batch processor whose exporter discards. Run it on its
// own (-run XXX): the test of this package turns tracing on for good.
func BenchmarkPurchaseTracing(b *testing.B) {
	b.Run("tracing=off", func(b *testing.B) {
		if telemetry.Active() {
			b.Skip("tracing is already on in this test binary: run with -run XXX")
		}
		benchPurchase(b, false)
	})
	b.Run("tracing=on_1pct", func(b *testing.B) {
		telemetry.Use(sdktrace.NewTracerProvider(
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))),
			sdktrace.WithBatcher(tracetest.NewNoopExporter())))
		benchPurchase(b, true)
	})
}

func benchPurchase(b *testing.B, traced bool) {
	stores := shoptest.NewStores(b)
	if traced {
		if err := telemetry.InstrumentRedis(stores.Redis.Client); err != nil {
			b.Fatal(err)
		}
	}
	a := shoptest.New(b, shoptest.Options{Stores: stores, Config: func(c *config.Config) {
		c.RateLimit = config.RateLimit{Limit: 1 << 30, Window: 10 * time.Second}
		c.TrustedProxies = []string{"0.0.0.0"}
	}})
	a.Sale(b, "bench", 100, 1<<30, 0)
	const shoppers = 200
	bearers, addrs := make([]string, shoppers), make([]string, shoppers)
	for i := range bearers {
		_, tok := a.Shopper(b, fmt.Sprintf("bench-%d@example.com", i))
		bearers[i], addrs[i] = "Bearer "+tok, fmt.Sprintf("198.18.%d.%d", (i+1)/256, (i+1)%256)
	}
	body := []byte(`{"quantity":1}`)
	var seq atomic.Uint64
	h := a.Fiber.Handler()
	b.ReportAllocs()
	b.SetParallelism(25)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var rc fasthttp.RequestCtx
		for pb.Next() {
			n := seq.Add(1)
			i := n % shoppers
			rc.ResetUserValues()
			rc.Request.Reset()
			rc.Response.Reset()
			rc.Request.Header.SetMethod(http.MethodPost)
			rc.Request.SetRequestURI("/api/v1/products/bench/purchase")
			rc.Request.Header.Set("Authorization", bearers[i])
			rc.Request.Header.Set("Content-Type", "application/json")
			rc.Request.Header.Set("Idempotency-Key", strconv.FormatUint(n, 36))
			rc.Request.Header.Set("X-Forwarded-For", addrs[i])
			rc.Request.SetBody(body)
			h(&rc)
			if rc.Response.StatusCode() != http.StatusAccepted {
				b.Fatalf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
			}
		}
	})
}
