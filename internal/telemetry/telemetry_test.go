package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestEnabledOnlyWithAnEndpoint(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "shop"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, false},
	} {
		if got := Enabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// A traced context's traceparent names its span; an untraced one none.
func TestTraceparentRoundTrip(t *testing.T) {
	if tp := Traceparent(context.Background()); tp != "" {
		t.Fatalf("untraced context: %q", tp)
	}
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "purchase")
	defer span.End()
	parent := Traceparent(ctx)
	l, ok := Link(parent)
	if !ok || l.SpanContext.SpanID() != span.SpanContext().SpanID() || l.SpanContext.TraceID() != span.SpanContext().TraceID() {
		t.Fatalf("traceparent %q links to %v", parent, l.SpanContext)
	}
	if _, ok := Link("garbage"); ok {
		t.Fatal("a malformed traceparent made a link")
	}
}

// Off, a job starts no span and records nothing. On, its span is a root
// whose context its calls run under, and a job recorded after the fact
// spans from its start.
func TestJobSpans(t *testing.T) {
	if _, s := Job(context.Background(), "off"); s.SpanContext().IsValid() || s.IsRecording() {
		t.Fatalf("a job's span with tracing off: %v", s.SpanContext())
	}
	rec := tracetest.NewSpanRecorder()
	Use(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec)))
	ctx, job := Job(context.Background(), "job", attribute.Int("n", 1))
	if !job.IsRecording() || trace.SpanFromContext(ctx) != job {
		t.Fatalf("a job's span with tracing on: %v", job.SpanContext())
	}
	End(job, errors.New("boom"))
	start := time.Now().Add(-time.Second)
	Did(context.Background(), "did", start)
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Parent().IsValid() || ended[0].Status().Code != codes.Error ||
		ended[1].Parent().IsValid() || !ended[1].StartTime().Equal(start) {
		t.Fatalf("spans: %+v", ended)
	}
}
