package writer

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shop-oss/shop/internal/telemetry"
)

var tracer = otel.Tracer("github.com/shop-oss/shop/internal/order/writer")

// maxLinks bounds the links of one batch's span (the SDK keeps 128 by
// default): a batch of a thousand orders links to its first ones.
const maxLinks = 128

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
	return tracer.Start(ctx, "order writer: persist orders", trace.WithSpanKind(trace.SpanKindConsumer),
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
	return tracer.Start(ctx, "order writer: record transitions", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(attribute.Int("shop.transitions", len(ts))))
}

func endSpan(span trace.Span, written int, err error) {
	span.SetAttributes(attribute.Int("shop.orders_written", written))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
