package writer

import (
	"context"
	"sync"
	"testing"
	"time"
)

// batches records the size of each batch an after-commit hook was handed.
type batches struct {
	mu    sync.Mutex
	sizes []int
	first chan struct{}
}

func (b *batches) hook(_ context.Context, orders []Persisted) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, len(orders))
	if len(b.sizes) == 1 {
		close(b.first)
	}
	return nil
}

func (b *batches) seen() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.sizes...)
}

// With Linger, orders that trickle in while a loop waits are written in
// one transaction: the first order after a quiet spell goes at once, the
// nine placed 10 ms apart during the loop's wait (5 s, ample on a loaded
// machine) share its next batch. Without it each would meet a waiting
// read and be a transaction of its own.
func TestWriterLingerGathersATrickleIntoOneBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Sale(t, "sku-l", 100, 0, 100)
	u := f.User(t)
	b := &batches{first: make(chan struct{})}
	w := start(f.writer("w1", Options{Concurrency: 1, Linger: 5 * time.Second, AfterCommit: b.hook}))
	defer w.Stop(t)
	f.place(t, u, "sku-l", 1)
	select {
	case <-b.first:
	case <-time.After(30 * time.Second):
		t.Fatal("the first order was not written within 30 s")
	}
	for range 9 {
		f.place(t, u, "sku-l", 1)
		time.Sleep(10 * time.Millisecond)
	}
	f.drained(t)
	if got := b.seen(); len(got) != 2 || got[0] != 1 || got[1] != 9 {
		t.Fatalf("batches %v, want [1 9]: the trickle in one transaction", got)
	}
	if f.OrderRows(t) != 10 {
		t.Fatalf("rows %d, want 10", f.OrderRows(t))
	}
}
