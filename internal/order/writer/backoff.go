package writer

import (
	"context"
	"errors"
	"time"
)

// errGaveUp: the writer was told to stop while the database was down; the
// batch stays pending in the stream and is written after a restart.
var errGaveUp = errors.New("order writer: stopped before the batch could be written")

// hookError carries a fault-injection hook's error up to Run, which stops
// as a crash would: nothing after the hook point happens.
type hookError struct{ err error }

func (h hookError) Error() string { return "fault injected: " + h.err.Error() }
func (h hookError) Unwrap() error { return h.err }

// backoff waits 100 ms, then twice as long each time, up to 5 s.
type backoff struct{ next time.Duration }

func newBackoff() *backoff { return &backoff{next: 100 * time.Millisecond} }

func (b *backoff) reset() { b.next = 100 * time.Millisecond }

// wait sleeps for the current delay; it returns false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(b.next*2, 5*time.Second)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
