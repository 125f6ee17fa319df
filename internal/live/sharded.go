package live

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Sharded subscriptions, on a Redis Cluster (inventory's ShardedChanges):
// the changes are SPUBLISHed on each SKU's channel, delivered by the master
// of its slot only, and a sharded channel has no pattern form. So the hub
// SSUBSCRIBEs to the channel of each watched SKU: when its first stream
// opens, and SUNSUBSCRIBEs when its last one ends.
//
// The SKUs of one order partition share its hash tag, so their channels
// share one slot: the hub holds one subscription connection per partition
// that has watched SKUs (go-redis routes it to the slot's master, and after
// a reconnect, a failover say, resubscribes all its channels there in one
// SSUBSCRIBE, which needs them in one slot). A partition's connection is
// closed with its last channel, so that a reconnect never lands on a
// random node with no channel to route by.
//
// Each confirmation of a channel's subscription (the first, or after a
// reconnect) reads the SKU's state again: its first stream read the state
// itself before the subscription was in place, and changes made while
// away were lost.
//
// The stock view (Options.View) is not fed on a cluster: it would need a
// subscription to every SKU it holds, not only the watched ones, so it is
// left unsubscribed and product reads go to Redis.

// shards is the sharded subscriptions of one Run; only Run's goroutine
// uses it.
type shards struct {
	h     *Hub
	parts map[int]*shard // by partition, only while it has channels
	// resync takes the SKUs whose subscriptions were confirmed, for one
	// worker to read again in turn.
	resync *skuQueue
}

// shard is the subscription connection of one partition.
type shard struct {
	ps       *redis.PubSub
	channels map[string]bool
	done     chan struct{} // closed when its receive loop ends
}

// runSharded holds the per-SKU subscriptions until ctx ends, following
// the watched SKUs (poked by subscribe and unsubscribe).
func (h *Hub) runSharded(ctx context.Context) {
	s := &shards{h: h, parts: map[int]*shard{}, resync: newSKUQueue()}
	worker := make(chan struct{})
	go func() { defer close(worker); s.resyncLoop(ctx) }()
	defer func() { <-worker }()
	defer s.closeAll()
	for {
		s.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-h.watched:
		}
	}
}

// poke tells the sharded subscriptions that the watched SKUs changed; it
// never blocks (one pending poke covers any number of changes).
func (h *Hub) poke() {
	select {
	case h.watched <- struct{}{}:
	default:
	}
}

// reconcile subscribes to the channels of the watched SKUs and
// unsubscribes from the others.
func (s *shards) reconcile(ctx context.Context) {
	want := s.wanted()
	s.unsubscribe(ctx, want)
	s.subscribe(ctx, want)
}

// unsubscribe drops the channels not in want, and the connections of the
// partitions left with none.
func (s *shards) unsubscribe(ctx context.Context, want map[int]map[string]bool) {
	for k, sh := range s.parts {
		var gone []string
		for ch := range sh.channels {
			if !want[k][ch] {
				gone = append(gone, ch)
			}
		}
		switch {
		case len(gone) == len(sh.channels):
			sh.close()
			delete(s.parts, k)
		case len(gone) > 0:
			if err := sh.ps.SUnsubscribe(ctx, gone...); err != nil {
				s.h.log.Warn("live stock: sharded unsubscribe failed", "partition", k, "err", err)
			}
			for _, ch := range gone {
				delete(sh.channels, ch)
			}
		}
	}
}

// subscribe adds the channels of want not yet subscribed, opening a
// partition's connection with its first ones.
func (s *shards) subscribe(ctx context.Context, want map[int]map[string]bool) {
	for k, chans := range want {
		sh := s.parts[k]
		var add []string
		for ch := range chans {
			if sh == nil || !sh.channels[ch] {
				add = append(add, ch)
			}
		}
		switch {
		case len(add) == 0:
			continue
		case sh == nil:
			sh = s.open(ctx, add)
			s.parts[k] = sh
		default:
			// On failure the channels stay in the PubSub's set: its
			// reconnect subscribes them again.
			if err := sh.ps.SSubscribe(ctx, add...); err != nil {
				s.h.log.Warn("live stock: sharded subscribe failed", "partition", k, "err", err)
			}
		}
		for _, ch := range add {
			sh.channels[ch] = true
		}
	}
}

// wanted is the channels of the watched SKUs, by partition.
func (s *shards) wanted() map[int]map[string]bool {
	parts := s.h.stock.Partitions()
	want := map[int]map[string]bool{}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	for sku := range s.h.topics {
		k := parts.Of(sku)
		if want[k] == nil {
			want[k] = map[string]bool{}
		}
		want[k][s.h.stock.ChangesChannel(sku)] = true
	}
	return want
}

// open starts a partition's subscription connection with its first
// channels: they route it to the partition slot's master.
func (s *shards) open(ctx context.Context, channels []string) *shard {
	sh := &shard{ps: s.h.rdb.SSubscribe(ctx, channels...), channels: map[string]bool{}, done: make(chan struct{})}
	ch := sh.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	go func() {
		defer close(sh.done)
		for m := range ch {
			switch m := m.(type) {
			case *redis.Message:
				s.h.receive(m)
			case *redis.Subscription:
				if m.Kind != "ssubscribe" {
					continue
				}
				if sku, ok := s.h.stock.ChangesSKU(m.Channel); ok {
					s.resync.add(sku)
				}
			}
		}
	}()
	return sh
}

// close ends the partition's connection and waits for its receive loop.
func (sh *shard) close() {
	_ = sh.ps.Close()
	<-sh.done
}

func (s *shards) closeAll() {
	for k, sh := range s.parts {
		sh.close()
		delete(s.parts, k)
	}
}

// resyncLoop reads again, one at a time, the SKUs whose subscriptions were
// confirmed, until ctx ends.
func (s *shards) resyncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.resync.ready:
		}
		s.h.resyncSKUs(ctx, s.resync.take())
	}
}

// skuQueue is a set of SKUs to read again, and a signal that it is not
// empty.
type skuQueue struct {
	mu    sync.Mutex
	skus  map[string]bool
	ready chan struct{}
}

func newSKUQueue() *skuQueue {
	return &skuQueue{skus: map[string]bool{}, ready: make(chan struct{}, 1)}
}

func (q *skuQueue) add(sku string) {
	q.mu.Lock()
	q.skus[sku] = true
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *skuQueue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.skus))
	for sku := range q.skus {
		out = append(out, sku)
	}
	clear(q.skus)
	return out
}
