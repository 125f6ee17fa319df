package telemetry

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
