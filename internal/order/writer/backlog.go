package writer

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// backlog paces the loops of one partition.
// More in docs/design/writer.md ("backlog.go").
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

// Drained tells whether the writers have read and acknowledged every entry
// of stream (or there is no stream): PostgreSQL then holds every order
// and transition it carried.
func Drained(ctx context.Context, rdb redis.UniversalClient, stream string) bool {
	groups, err := rdb.XInfoGroups(ctx, stream).Result()
	if err == nil {
		return len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0
	}
	return rdb.XLen(ctx, stream).Val() == 0
}
