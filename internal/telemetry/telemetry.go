// Package telemetry owns the process's OpenTelemetry tracing: it is on
// only when the standard OTEL_* variables name an OTLP endpoint, and then
// exports over OTLP/HTTP with the sampler OTEL_TRACES_SAMPLER names.
// Off, nothing is installed and the instrumented paths cost nothing
// (docs/design/observability.md).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Enabled tells whether the environment asks for traces: an OTLP
// endpoint is set and OTEL_TRACES_EXPORTER is not "none".
func Enabled(getenv func(string) string) bool {
	if getenv("OTEL_SDK_DISABLED") == "true" || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// active is set once Start has installed a tracer provider: the
// instrumentation (HTTP middleware, Redis and PostgreSQL hooks) is added
// only then, so that off it costs nothing at all.
var active atomic.Bool

// Active tells whether Start turned tracing on in this process.
func Active() bool { return active.Load() }

// Start installs the global tracer provider and the W3C propagator when
// the environment asks for traces (Enabled); the service is named by
// OTEL_SERVICE_NAME, else service. It returns whether tracing is on and
// the function that flushes and stops it.
func Start(ctx context.Context, service string) (on bool, stop func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !Enabled(os.Getenv) {
		return false, noop, nil
	}
	exp, err := otlptracehttp.New(ctx) // endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*
	if err != nil {
		return false, noop, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	name := service
	if v := os.Getenv("OTEL_SERVICE_NAME"); v != "" {
		name = v
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(name)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return false, noop, fmt.Errorf("tracing: resource: %w", err)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER and its argument (the
	// SDK reads them; the default is parentbased_always_on).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(lean{tp: tp})
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	active.Store(true)
	return true, tp.Shutdown, nil
}

// Use installs tp as the global tracer provider, with the W3C
// propagator, and turns the instrumentation on: for tests, with an
// in-memory recorder in place of the OTLP exporter.
func Use(tp trace.TracerProvider) {
	otel.SetTracerProvider(lean{tp: tp})
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	active.Store(true)
}

// InstrumentRedis makes each of rdb's commands a child span of its
// caller's. Without the command's text: it costs an allocation of the
// whole command on every call, sampled or not (a third of tracing's
// cost per purchase when it was on), and its arguments include session
// tokens and emails, which have no place in a trace. Nor the caller's
// function, which costs a stack walk per command. Nor the
// auto-pipeliner's batches of script calls: each call has a span of its
// own in its caller's trace (autopipe), and the batch's span named its
// commands, again at a cost on every purchase.
func InstrumentRedis(rdb redis.UniversalClient) error {
	return redisotel.InstrumentTracing(rdb, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false),
		redisotel.WithCommandsFilter(onlyScripts))
}

// onlyScripts tells a pipeline of script calls only (the auto-pipeliner's).
func onlyScripts(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if n := c.Name(); n != "evalsha" && n != "eval" && n != "evalsha_ro" && n != "eval_ro" {
			return false
		}
	}
	return true
}

// jobs is the tracer of the spans background jobs start (Job).
var jobs = otel.Tracer("github.com/shop-oss/shop/internal/telemetry")

// Job starts the span of a background job that has found work (the
// orders a sweep claimed, a waiting room to record): a root span, there
// being no request, under which the job's Redis and PostgreSQL calls are
// children. A loop starts one only once it knows it has work, since a
// client call with no span above it starts none (lean): a tick that
// finds nothing makes no trace. Off, it returns ctx and a span that
// does nothing, for the cost of reading a flag.
func Job(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !active.Load() {
		// The no-op span of a context without one: no allocation.
		return ctx, trace.SpanFromContext(context.Background())
	}
	// A copy, so that attrs does not escape: off, the caller's slice
	// stays on its stack.
	return jobs.Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
}

// Did records a background job that could tell it had work only by
// doing it (an admitter's turn that admitted anyone): a root span from
// start to now, without children, since its calls ran before anyone
// knew they were a job's. Off, it does nothing.
func Did(ctx context.Context, name string, start time.Time, attrs ...attribute.KeyValue) {
	if !active.Load() {
		return
	}
	_, span := jobs.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(slices.Clone(attrs)...))
	span.End()
}

// End ends span, marked failed by err unless err is nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Traceparent is the W3C traceparent of ctx's span, "" when it has none
// or it is not sampled: what an order event carries to the writer.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return "" // tracing off, or this request not traced: no work
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Link is the span link to the span a traceparent names (false when it
// names none).
func Link(traceparent string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	return trace.Link{SpanContext: sc}, sc.IsValid()
}
