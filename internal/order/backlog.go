package order

import (
	"context"
	"sync"
)

// backlog paces the loops of one partition. The first loop always reads;
// the others (Concurrency > 1) read new entries only while the stream is
// behind: from a read of new entries that came back full until one that
// did not. They read without blocking, so the first read after the
// backlog is gone stops them. Their own pending entries (a retry, a lost
// reply) they read first, whatever the flag says.
//
// Why: the loops exist to overlap batches when there is a backlog to
// drain (one waits for PostgreSQL while another reads and acknowledges).
// At a moderate rate they would instead split the trickle three ways,
// each blocked read taking the next few entries, and every few orders
// would be a transaction of its own. PostgreSQL's cost per transaction
// (a COMMIT and its WAL flush, the round trips, the sold-count row) is
// ~650 µs of its CPU against ~26 µs per order on the development machine
// (BENCHMARKS.md): at half the maximum purchase rate three loops made a
// commit per ~7 orders, a third of a core, on cores the purchases share.
//
// A follower that waits sends nothing to Redis: another writer process's
// housekeeping may forget it after ForgetIdle (it holds nothing), and
// its next read adds it back.
type backlog struct {
	mu   sync.Mutex
	on   bool
	wake chan struct{} // closed when on becomes true
}

func newBacklog() *backlog { return &backlog{wake: make(chan struct{})} }

// saw records a read of n entries where a full batch is batch.
func (b *backlog) saw(n, batch int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch full := n >= batch; {
	case full && !b.on:
		b.on = true
		close(b.wake)
	case !full && b.on:
		b.on = false
		b.wake = make(chan struct{})
	}
}

// wait returns once the stream is behind, or when ctx is done.
func (b *backlog) wait(ctx context.Context) {
	b.mu.Lock()
	on, wake := b.on, b.wake
	b.mu.Unlock()
	if on {
		return
	}
	select {
	case <-wake:
	case <-ctx.Done():
	}
}
