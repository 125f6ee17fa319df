// Package tracingtest checks the traces of a purchase in process: the
// HTTP server span honours the caller's traceparent, the reserve script's
// Redis call is its child, and the writer's span that persists the order
// links to it. It turns tracing on for the whole test binary (the tracer
// provider is global), which is why it is a package of its own.
package tracingtest

import (
	"net/http"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/telemetry"
)

func TestPurchaseTraceReachesTheWriter(t *testing.T) {
	rec := recorder()
	stores := shoptest.NewStores(t)
	if err := telemetry.InstrumentRedis(stores.Redis.Client); err != nil {
		t.Fatal(err)
	}
	app := shoptest.New(t, shoptest.Options{Stores: stores})
	app.Sale(t, "traced", 100, 5, 0)
	_, tok := app.Shopper(t, "traced@example.com")

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := app.Do(t, "POST", "/api/v1/products/traced/purchase", tok, `{"quantity":1}`,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	shoptest.WantStatus(t, r, http.StatusAccepted)
	app.Drain(t)

	var server, script, writer sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); writer == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, s := range rec.Ended() {
			switch {
			case s.SpanKind() == trace.SpanKindServer && s.SpanContext().TraceID().String() == traceID:
				server = s
			case s.SpanContext().TraceID().String() == traceID && (s.Name() == "evalsha" || s.Name() == "eval"):
				script = s
			case s.Name() == "order writer: persist orders":
				for _, l := range s.Links() {
					if l.SpanContext.TraceID().String() == traceID {
						writer = s
					}
				}
			}
		}
	}
	if server == nil || server.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("no server span in the caller's trace, child of its span: %v", names(rec.Ended()))
	}
	if script == nil || !descends(rec.Ended(), script, server) {
		t.Fatalf("no reserve script span under the server span: %v", names(rec.Ended()))
	}
	if writer == nil {
		t.Fatalf("no writer span linked to the purchase: %v", names(rec.Ended()))
	}
}

// descends tells whether s is under root in spans.
func descends(spans []sdktrace.ReadOnlySpan, s, root sdktrace.ReadOnlySpan) bool {
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, x := range spans {
		byID[x.SpanContext().SpanID()] = x
	}
	for cur := s; cur != nil; cur = byID[cur.Parent().SpanID()] {
		if cur.Parent().SpanID() == root.SpanContext().SpanID() {
			return true
		}
	}
	return false
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name()+"@"+s.SpanContext().TraceID().String()[:8])
	}
	return out
}

// A payment's trace leads to the writer's recording of the order's
// transition: the pay script writes the request's traceparent into the
// transition event, and the writer's span links to it.
func TestPaymentTraceReachesTheWriter(t *testing.T) {
	rec := recorder()
	app := shoptest.New(t, shoptest.Options{})
	app.Sale(t, "paid-traced", 100, 5, 0)
	_, tok := app.Shopper(t, "paid-traced@example.com")
	var placed struct {
		OrderID string `json:"order_id"`
	}
	app.Do(t, "POST", "/api/v1/products/paid-traced/purchase", tok, `{"quantity":1}`).Decode(t, http.StatusAccepted, &placed)
	app.Drain(t)

	const traceID = "5bf92f3577b34da6a3ce929d0e0e4737"
	r := app.Do(t, "POST", "/api/v1/orders/"+placed.OrderID+"/pay", tok, `{"payment_token":"tok_visa"}`,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b8-01")
	shoptest.WantStatus(t, r, http.StatusOK)
	app.Drain(t)

	var recorded sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); recorded == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, s := range rec.Ended() {
			if s.Name() != "order writer: record transitions" {
				continue
			}
			for _, l := range s.Links() {
				if l.SpanContext.TraceID().String() == traceID {
					recorded = s
				}
			}
		}
	}
	if recorded == nil {
		t.Fatalf("no writer span recording the transition linked to the payment: %v", names(rec.Ended()))
	}
}

// recorder is the test binary's span recorder, installed once: OpenTelemetry's
// global provider hands spans to the first provider set, so the tests
// share it and tell their spans apart by trace id. It records every
// span, as OTEL_TRACES_SAMPLER=always_on does.
var recorder = sync.OnceValue(func() *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	telemetry.Use(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec)))
	return rec
})

// An entry's two writes are batched with other entries' on a context of
// their own: the entry's trace holds a span of each wait, under its
// request, linked to the statement's span, which links back to it.
func TestDrawEntryTraceReachesItsBatches(t *testing.T) {
	rec := recorder()
	app := shoptest.New(t, shoptest.Options{})
	app.Product(t, "drawn-traced", 100)
	app.Round(t, "drawn-traced", inventory.Seed{Quantity: 1, Draw: &inventory.DrawSettings{ClosesAt: time.Now().Add(time.Hour)}})
	_, tok := app.Shopper(t, "drawn-traced@example.com")

	const traceID = "6bf92f3577b34da6a3ce929d0e0e4738"
	r := app.Do(t, "POST", "/api/v1/products/drawn-traced/draw/entries", tok, `{"payment_token":"tok_visa"}`,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b9-01")
	shoptest.WantStatus(t, r, http.StatusCreated)

	spans := rec.Ended()
	var server sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindServer && s.SpanContext().TraceID().String() == traceID {
			server = s
		}
	}
	if server == nil {
		t.Fatalf("no server span in the entry's trace: %v", names(spans))
	}
	for _, name := range []string{"draw: insert entries", "draw: record authorisations"} {
		wait := named(spans, name+": wait", traceID)
		if wait == nil || !descends(spans, wait, server) {
			t.Fatalf("no %q span under the entry's request: %v", name+": wait", names(spans))
		}
		var batch sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == name && linksToSpan(s, wait.SpanContext()) {
				batch = s
			}
		}
		if batch == nil || !linksToSpan(wait, batch.SpanContext()) {
			t.Fatalf("no %q span linked to and from the entry's wait: %v", name, names(spans))
		}
	}
}

// named is the span called name in trace traceID (nil: none).
func named(spans []sdktrace.ReadOnlySpan, name, traceID string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.Name() == name && s.SpanContext().TraceID().String() == traceID {
			return s
		}
	}
	return nil
}

// linksToSpan tells whether s links to the span to.
func linksToSpan(s sdktrace.ReadOnlySpan, to trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == to.TraceID() && l.SpanContext.SpanID() == to.SpanID() {
			return true
		}
	}
	return false
}
