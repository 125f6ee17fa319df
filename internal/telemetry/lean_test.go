package telemetry

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Under a local span that is not sampled no child is started (the parent
// comes back); under a sampled one, or a remote unsampled one that the
// sampler may still record, the SDK starts it as ever.
func TestLeanStartsNoChildOfAnUnsampledSpan(t *testing.T) {
	never := lean{tp: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))}.Tracer("t")
	always := lean{tp: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))}.Tracer("t")

	ctx, parent := never.Start(context.Background(), "root")
	if !parent.SpanContext().IsValid() || parent.IsRecording() {
		t.Fatalf("an unsampled root: %+v", parent.SpanContext())
	}
	if _, child := never.Start(ctx, "child"); child.SpanContext().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("a child of an unsampled local span was started: %v", child.SpanContext().SpanID())
	}

	ctx, sampled := always.Start(context.Background(), "root")
	if _, child := always.Start(ctx, "child"); child.SpanContext().SpanID() == sampled.SpanContext().SpanID() || !child.IsRecording() ||
		child.SpanContext().TraceID() != sampled.SpanContext().TraceID() {
		t.Errorf("a child of a sampled span: %v recording %v", child.SpanContext(), child.IsRecording())
	}

	remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true}))
	if _, child := always.Start(remote, "server"); !child.IsRecording() {
		t.Error("the sampler was not asked about a child of a remote unsampled span")
	}
}

// A client call (a Redis command, a query) with no span above it starts
// none: alone it would be a trace of its own, a background loop's poll
// (issue 46). Under a span it is that span's child; a span of another
// kind (a server's, a job's) starts a trace as ever.
func TestLeanStartsNoClientSpanWithoutParent(t *testing.T) {
	tr := lean{tp: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))}.Tracer("t")
	client := trace.WithSpanKind(trace.SpanKindClient)

	if _, s := tr.Start(context.Background(), "zrange", client); s.SpanContext().IsValid() || s.IsRecording() {
		t.Errorf("a client span without a parent was started: %v", s.SpanContext())
	}
	ctx, job := tr.Start(context.Background(), "job")
	if !job.IsRecording() {
		t.Fatal("a root span that is not a client's was not started")
	}
	if _, s := tr.Start(ctx, "zrange", client); !s.IsRecording() || s.SpanContext().TraceID() != job.SpanContext().TraceID() {
		t.Errorf("a client span under a job: %v recording %v", s.SpanContext(), s.IsRecording())
	}
	remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true}))
	if _, s := tr.Start(remote, "get", client); !s.IsRecording() {
		t.Error("a client span under a remote parent was not started")
	}
}
