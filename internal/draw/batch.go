package draw

import (
	"context"
	"sync"
)

// batch writes the calls made at once in one statement and one commit:
// a call joins the pending list, and up to flushers goroutines take it in
// slices of at most size. Nothing waits for company: a call made while
// no flusher runs is written at once, alone, and the calls that arrive
// while a statement runs make the next one. Two statements per entry,
// each its own commit, held entries to 0.2 of purchases per second
// (docs/design/draws.md, "Entering at speed").
type batch[In, Out any] struct {
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
}

func newBatch[In, Out any](size, flushers int, write func(context.Context, []In) ([]Out, error)) *batch[In, Out] {
	return &batch[In, Out]{write: write, size: size, flushers: flushers}
}

// do writes in with whatever else is pending and returns its answer. It
// waits for the statement even when ctx ends: the caller must know
// whether the row was written (each statement is bounded by dbTimeout).
func (b *batch[In, Out]) do(in In) (Out, error) {
	c := &batchCall[In, Out]{in: in, done: make(chan struct{})}
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
		outs, err := b.write(ctx, ins)
		cancel()
		for i, c := range calls {
			if err != nil {
				c.err = err
			} else {
				c.out = outs[i]
			}
			close(c.done)
		}
	}
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
