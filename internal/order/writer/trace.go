package writer

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shop-oss/shop/internal/telemetry"
)

var tracer = otel.Tracer("github.com/shop-oss/shop/internal/order/writer")

// maxLinks bounds the links of one batch's span (the SDK keeps 128 by
// default): a batch of a thousand orders links to its first ones.
const maxLinks = 128

// batchSpan starts the span of the writer's job, one batch: written,
// its hooks run, acknowledged. A root span, whose children are the
// batch's Redis and PostgreSQL calls, started only once a read returned
// entries: the reads of an idle writer start no trace (telemetry's lean
// provider starts no client span without a parent), nor its
// housekeeping, upkeep on a clock.
func batchSpan(ctx context.Context, part, entries int) (context.Context, trace.Span) {
	return tracer.Start(ctx, "order writer: batch", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.Int("shop.partition", part), attribute.Int("shop.entries", entries)))
}

// persistSpan starts the span of persisting a batch, linked to the
// purchases that accepted its orders (each event's traceparent): a trace
// of a purchase leads to the write of its order. With tracing off the
// global provider is a no-op and the events carry no traceparent.
func persistSpan(ctx context.Context, events []event) (context.Context, trace.Span) {
	var links []trace.Link
	for _, e := range events {
		if l, ok := telemetry.Link(e.traceparent); ok && len(links) < maxLinks {
			l.Attributes = []attribute.KeyValue{attribute.String("shop.order_id", e.orderID.String())}
			links = append(links, l)
		}
	}
	return tracer.Start(ctx, "order writer: persist orders",
		trace.WithLinks(links...), trace.WithAttributes(attribute.Int("shop.orders", len(events))))
}

// transitionsSpan starts the span of recording a batch's transitions,
// linked to the requests (a payment, a cancel) that made them, as
// persistSpan is to the purchases.
func transitionsSpan(ctx context.Context, ts []Transition) (context.Context, trace.Span) {
	var links []trace.Link
	for _, t := range ts {
		if l, ok := telemetry.Link(t.traceparent); ok && len(links) < maxLinks {
			l.Attributes = []attribute.KeyValue{attribute.String("shop.order_id", t.OrderID),
				attribute.String("shop.order_status", t.Status)}
			links = append(links, l)
		}
	}
	return tracer.Start(ctx, "order writer: record transitions",
		trace.WithLinks(links...), trace.WithAttributes(attribute.Int("shop.transitions", len(ts))))
}

func endSpan(span trace.Span, written int, err error) {
	span.SetAttributes(attribute.Int("shop.orders_written", written))
	telemetry.End(span, err)
}
