package server

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// serverSpan starts each request's server span, in the trace of an
// incoming traceparent, and hands it to the handlers in the user
// context. Not gofiber/contrib's otelfiber: it built its attributes and
// recorded its metrics for every request, sampled or not (about 16 KB
// and 85 allocations a purchase at a 1 % sampler); here a span that is
// not recorded costs its context and nothing more (BENCHMARKS.md,
// issue 35).
func serverSpan() fiber.Handler {
	tracer := otel.Tracer("github.com/shop-oss/shop/internal/server")
	return func(c *fiber.Ctx) error {
		ctx := otel.GetTextMapPropagator().Extract(c.UserContext(), headerCarrier{&c.Request().Header})
		ctx, span := tracer.Start(ctx, "HTTP "+c.Method(), trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		c.SetUserContext(ctx)
		err := c.Next() // observe, inside, has answered any error by now
		if span.IsRecording() {
			// The span is exported after the request, whose buffers Fiber
			// reuses: c.Method() and c.Path() alias them, so they are
			// copied (a span once showed another request's path).
			status, method := c.Response().StatusCode(), methodLabel(c.Method())
			span.SetName(method + " " + c.Route().Path)
			span.SetAttributes(attribute.String("http.request.method", method),
				attribute.String("http.route", c.Route().Path), attribute.String("url.path", strings.Clone(c.Path())),
				attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, "")
			}
		}
		return err
	}
}

// headerCarrier reads a trace context from the request's headers.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (c headerCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c headerCarrier) Keys() []string {
	var keys []string
	c.h.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}
