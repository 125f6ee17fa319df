package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// lean is a tracer provider that starts no span under a local span that
// is not recorded: it hands back the parent, whose methods do nothing.
// Every standard sampler would not record such a child either (the
// parent-based ones follow the parent; the ratio one decides by the
// trace id, the parent's; always_on records every local parent), so the
// traces are the same, and an unsampled purchase's Redis calls cost no
// span each (BENCHMARKS.md, issue 35). A remote parent (an incoming
// traceparent) is left to the sampler.
//
// Nor does it start a client span (a Redis command, a query) that has
// no parent at all: that is a background loop's call outside any job,
// most often a poll that finds nothing (the writer's XREADGROUP, the
// admitter's tick), and as a root of its own it made an idle instance
// export a trace per call (issue 46). A background job that has work
// starts its own span (Job) and runs its calls under it.
type lean struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (l lean) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return leanTracer{t: l.tp.Tracer(name, opts...)}
}

type leanTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (l leanTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if p := trace.SpanFromContext(ctx); !p.IsRecording() {
		sc := p.SpanContext()
		if sc.IsValid() && !sc.IsRemote() && !sc.IsSampled() {
			return ctx, p
		}
		// Only here, without a recorded parent, are the options read: a
		// traced request's calls pay nothing for this check.
		if !sc.IsValid() && clientKind(opts) {
			return ctx, p // p does nothing: ctx holds no span
		}
	}
	return l.t.Start(ctx, name, opts...)
}

func clientKind(opts []trace.SpanStartOption) bool {
	c := trace.NewSpanStartConfig(opts...)
	return c.SpanKind() == trace.SpanKindClient
}
