package tracingtest

import (
	"testing"
	"time"

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
	shoptest.PurchaseBench(b, a)()
}
