package draw

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shop-oss/shop/internal/telemetry"
)

var tracer = otel.Tracer("github.com/shop-oss/shop/internal/draw")

// maxLinks bounds a batch span's links to its callers (the SDK keeps 128).
const maxLinks = 64

// batch writes the calls made at once in one statement and one commit:
// a call joins the pending list, and up to flushers goroutines take it in
// slices of at most size. Nothing waits for company: a call made while
// no flusher runs is written at once, alone, and the calls that arrive
// while a statement runs make the next one. Two statements per entry,
// each its own commit, held entries to 0.2 of purchases per second
// (docs/design/draws.md, "Entering at speed").
//
// A statement runs on a context of its own, not a caller's, so a traced
// call gets a span of its wait ("<name>: wait", under its request) and
// the statement a span of its own (name), whose database calls are its
// children; the two link to each other.
type batch[In, Out any] struct {
	name string
	// write writes ins and answers one Out per in, in order; an error
	// answers every call of the slice.
	write    func(ctx context.Context, ins []In) ([]Out, error)
	size     int
	flushers int

	mu      sync.Mutex
	pending []*batchCall[In, Out]
	running int
}

type batchCall[In, Out any] struct {
	in   In
	out  Out
	err  error
	done chan struct{}
	// waiting is the span of a traced call's wait (invalid: untraced),
	// written the statement's span and the rows it wrote.
	waiting, written trace.SpanContext
	rows             int
}

func newBatch[In, Out any](name string, size, flushers int, write func(context.Context, []In) ([]Out, error)) *batch[In, Out] {
	return &batch[In, Out]{name: name, write: write, size: size, flushers: flushers}
}

// do writes in with whatever else is pending and returns its answer. It
// waits for the statement even when ctx ends: the caller must know
// whether the row was written (each statement is bounded by dbTimeout).
func (b *batch[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &batchCall[In, Out]{in: in, done: make(chan struct{})}
	var span trace.Span
	if trace.SpanFromContext(ctx).IsRecording() { // else no span: tracing off, or not sampled
		_, span = tracer.Start(ctx, b.name+": wait")
		c.waiting = span.SpanContext()
	}
	defer func() {
		if span != nil {
			if c.written.IsValid() {
				span.AddLink(trace.Link{SpanContext: c.written})
			}
			span.SetAttributes(attribute.Int("shop.batch_rows", c.rows))
			telemetry.End(span, c.err)
		}
	}()
	b.mu.Lock()
	b.pending = append(b.pending, c)
	start := b.running < b.flushers
	if start {
		b.running++
	}
	b.mu.Unlock()
	if start {
		go b.flush()
	}
	<-c.done
	return c.out, c.err
}

// flush writes pending slices until none is left; the goroutine lives
// only while there is work, so a Service needs no stop.
func (b *batch[In, Out]) flush() {
	for {
		calls := b.take()
		if calls == nil {
			return
		}
		ins := make([]In, len(calls))
		for i, c := range calls {
			ins[i] = c.in
		}
		ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
		ctx, span := b.span(ctx, calls)
		outs, err := b.write(ctx, ins)
		telemetry.End(span, err)
		cancel()
		written := span.SpanContext()
		if !written.IsSampled() {
			written = trace.SpanContext{} // its own sampling left it out: no link to a span never exported
		}
		for i, c := range calls {
			c.written, c.rows = written, len(calls)
			if err != nil {
				c.err = err
			} else {
				c.out = outs[i]
			}
			close(c.done)
		}
	}
}

// span starts the span of a statement for calls, linked to their waits,
// when any of them is traced; otherwise it starts none (an untraced
// entry makes no trace).
func (b *batch[In, Out]) span(ctx context.Context, calls []*batchCall[In, Out]) (context.Context, trace.Span) {
	var links []trace.Link
	for _, c := range calls {
		if c.waiting.IsValid() && len(links) < maxLinks {
			links = append(links, trace.Link{SpanContext: c.waiting})
		}
	}
	if links == nil {
		return ctx, trace.SpanFromContext(context.Background()) // a no-op span
	}
	return tracer.Start(ctx, b.name, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("shop.batch_rows", len(calls))))
}

// take removes the next slice of pending calls, or ends this flusher's
// turn (nil) when there are none.
func (b *batch[In, Out]) take() []*batchCall[In, Out] {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.pending), b.size)
	if n == 0 {
		b.running--
		return nil
	}
	calls := b.pending[:n:n]
	b.pending = append([]*batchCall[In, Out](nil), b.pending[n:]...)
	return calls
}
