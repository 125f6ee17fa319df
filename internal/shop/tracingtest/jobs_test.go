package tracingtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// An order left unpaid is expired by the sweeper as one job: a root span
// with the expiry's Redis calls under it, which the writer's recording
// of the transition links to, as it links a cancel to its request.
func TestExpiryIsOneTraceTheWriterLinksTo(t *testing.T) {
	rec := recorder()
	app := shoptest.New(t, shoptest.Options{Stores: tracedStores(t),
		Config: func(c *config.Config) { c.PaymentTTL = time.Second }})
	app.Sale(t, "expiring", 100, 5, 0)
	_, tok := app.Shopper(t, "expiring@example.com")
	runWriter(t, app)
	from := len(rec.Ended())
	r := app.Do(t, "POST", "/api/v1/products/expiring/purchase", tok, `{"quantity":1}`)
	shoptest.WantStatus(t, r, http.StatusAccepted)

	// The writer's span recording the expiry, and the sweeper's job it
	// links to.
	var job sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(30 * time.Second); job == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ended := rec.Ended()[from:]
		for _, s := range ended {
			if s.Name() != "order writer: record transitions" {
				continue
			}
			for _, l := range s.Links() {
				for _, root := range inTrace(ended, l.SpanContext.TraceID()) {
					if root.Name() == "order sweeper: expire orders" && !root.Parent().IsValid() {
						job = root
					}
				}
			}
		}
	}
	if job == nil {
		t.Fatalf("no writer span recording the expiry linked to a sweeper's job: %v", names(rec.Ended()))
	}
	spans := inTrace(rec.Ended(), job.SpanContext().TraceID())
	redisCalls := 0
	for _, s := range spans {
		if s != job && !descends(spans, s, job) {
			t.Errorf("span %s of the sweeper's trace is not under its job's span", s.Name())
		}
		if strings.Contains(s.InstrumentationScope().Name, "redisotel") {
			redisCalls++
		}
	}
	if redisCalls == 0 {
		t.Errorf("the sweeper's job has no Redis call under it: %v", names(spans))
	}
}

// The views a product read counts are written by a background loop, a
// batch at a time: each batch one job, its pipeline under it, outside
// the read's trace.
func TestViewCountsAreWrittenAsAJob(t *testing.T) {
	rec := recorder()
	app := shoptest.New(t, shoptest.Options{Stores: tracedStores(t)})
	app.Product(t, "viewed", 100)
	from := len(rec.Ended())
	shoptest.WantStatus(t, app.Do(t, "GET", "/api/v1/products/viewed", "", ""), http.StatusOK)

	var job sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(30 * time.Second); job == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, s := range rec.Ended()[from:] {
			if s.Name() == "visitor: write counts" {
				job = s
			}
		}
	}
	if job == nil || job.Parent().IsValid() {
		t.Fatalf("no root span of the views' write: %v", names(rec.Ended()[from:]))
	}
	var pipeline bool
	for _, s := range inTrace(rec.Ended(), job.SpanContext().TraceID()) {
		pipeline = pipeline || (strings.HasPrefix(s.Name(), "redis.pipeline") && descends(rec.Ended(), s, job))
	}
	if !pipeline {
		t.Errorf("the views' write has no Redis pipeline under it: %v", names(inTrace(rec.Ended(), job.SpanContext().TraceID())))
	}
}
