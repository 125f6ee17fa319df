// Package logbuf batches a process's log lines into few writes: the access
// log writes one line per request, and one write(2) per line to a pipe or
// file cost more CPU than formatting the line (BENCHMARKS.md, issue 16).
//
// Lines are buffered for at most Interval (or until Size bytes are
// waiting) and written whole, in order; a record at Warn or above is
// written at once, with everything before it, so an error is never left
// in the buffer of a process about to die. Close writes what is left. What
// a SIGKILL can lose is the last Interval of Info and Debug lines.
package logbuf

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Defaults of New.
const (
	Interval = 100 * time.Millisecond
	Size     = 64 << 10
)

// Writer buffers writes to an underlying writer, flushing every Interval.
// It is safe for concurrent use.
type Writer struct {
	mu     sync.Mutex
	buf    *bufio.Writer
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

// New starts a Writer over w that flushes every interval (0: Interval) and
// whenever size bytes (0: Size) are waiting.
func New(w io.Writer, interval time.Duration, size int) *Writer {
	if interval <= 0 {
		interval = Interval
	}
	if size <= 0 {
		size = Size
	}
	lw := &Writer{buf: bufio.NewWriterSize(w, size), stop: make(chan struct{}), done: make(chan struct{})}
	go lw.run(interval)
	return lw
}

func (w *Writer) run(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = w.Flush() // a failing stdout has nowhere to report to
		case <-w.stop:
			return
		}
	}
}

// Write buffers p; a p larger than the free space goes out at once, whole.
// After Close it writes through.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		n, err := w.buf.Write(p)
		if err == nil {
			err = w.buf.Flush()
		}
		return n, err
	}
	if len(p) > w.buf.Available() && w.buf.Buffered() > 0 {
		// Keep lines whole: never split one across two writes.
		if err := w.buf.Flush(); err != nil {
			return 0, err
		}
	}
	return w.buf.Write(p)
}

// Flush writes what is buffered.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Flush()
}

// Close stops the periodic flush and writes what is left; later writes go
// straight through.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	return w.Flush()
}

// Handler wraps h, which writes to w, so that a record at Warn or above is
// flushed as soon as it is written.
func Handler(h slog.Handler, w *Writer) slog.Handler { return flushing{h, w} }

type flushing struct {
	slog.Handler
	w *Writer
}

func (f flushing) Handle(ctx context.Context, r slog.Record) error {
	err := f.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := f.w.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (f flushing) WithAttrs(as []slog.Attr) slog.Handler {
	return flushing{f.Handler.WithAttrs(as), f.w}
}

func (f flushing) WithGroup(name string) slog.Handler {
	return flushing{f.Handler.WithGroup(name), f.w}
}
