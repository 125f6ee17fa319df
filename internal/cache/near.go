package cache

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/redis/go-redis/v9"
)

// The near cache: an in-process copy of recent reads in front of Redis, on
// when Options.NearTTL > 0.
// More in docs/design/cache.md ("near.go").

// defaultNearSize bounds the near cache when Options.NearSize is 0.
const defaultNearSize = 10000

type nearEntry struct {
	value    []byte // shared by every reader: never modified
	notFound bool
	tags     []string
	expires  time.Time
	decoded  any // value decoded by GetJSONShared, guarded by near.mu
}

type near struct {
	ttl time.Duration

	mu    sync.Mutex
	lru   *simplelru.LRU[string, *nearEntry]
	epoch uint64 // bumped by every invalidation
	ready bool   // subscribed: other processes' invalidations are heard
}

func newNear(ttl time.Duration, size int) *near {
	if size <= 0 {
		size = defaultNearSize
	}
	lru, err := simplelru.NewLRU[string, *nearEntry](size, nil)
	if err != nil {
		panic(err) // only for a size <= 0, excluded above
	}
	return &near{ttl: ttl, lru: lru}
}

// get returns key's entry if it has one that has not expired.
func (n *near) get(key string, now time.Time) (nearEntry, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.live(key, now)
	if e == nil {
		return nearEntry{}, false
	}
	return *e, true
}

// live is key's entry if it has not expired; n.mu must be held.
func (n *near) live(key string, now time.Time) *nearEntry {
	e, ok := n.lru.Get(key)
	if !ok {
		return nil
	}
	if !now.Before(e.expires) {
		n.lru.Remove(key)
		return nil
	}
	return e
}

// decoded returns the value GetJSONShared decoded from key's entry, if
// the entry is live and has one.
func (n *near) decoded(key string, now time.Time) (any, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := n.live(key, now); e != nil && e.decoded != nil {
		return e.decoded, true
	}
	return nil, false
}

// keepDecoded remembers v, decoded from b, with key's entry if that entry
// still holds exactly b (the same bytes, not a newer fill's).
func (n *near) keepDecoded(key string, b []byte, v any) {
	if len(b) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e, ok := n.lru.Peek(key); ok && len(e.value) > 0 && &e.value[0] == &b[0] {
		e.decoded = v
	}
}

// begin notes the epoch a fill starts in; ok is false while invalidations
// are not heard, and the fill must then store nothing.
func (n *near) begin() (epoch uint64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.epoch, n.ready
}

// put stores a fill's result if no invalidation happened since begin.
func (n *near) put(epoch uint64, started time.Time, key string, tags []string, value []byte, notFound bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.ready || n.epoch != epoch {
		return
	}
	n.lru.Add(key, &nearEntry{value: value, notFound: notFound, tags: slices.Clone(tags), expires: started.Add(n.ttl)})
}

// dropKey forgets key and fences the fills in flight.
func (n *near) dropKey(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.epoch++
	n.lru.Remove(key)
}

// dropTag forgets every entry stored with tag and fences the fills in
// flight. It walks every entry: tags are dropped by admin writes, rarely.
func (n *near) dropTag(tag string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.epoch++
	for _, k := range n.lru.Keys() {
		if e, ok := n.lru.Peek(k); ok && slices.Contains(e.tags, tag) {
			n.lru.Remove(k)
		}
	}
}

// reset forgets everything; ready says whether invalidations are heard
// from now on.
func (n *near) reset(ready bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.epoch++
	n.lru.Purge()
	n.ready = ready
}

// nearGet is Get through the near cache.
func (c *Cache) nearGet(ctx context.Context, key string, tags []string, load Loader) ([]byte, error) {
	started := time.Now()
	if e, ok := c.near.get(key, started); ok {
		c.m.nearHits.Inc()
		if e.notFound {
			return nil, ErrNotFound
		}
		return e.value, nil
	}
	c.m.nearMisses.Inc()
	epoch, ok := c.near.begin()
	if !ok {
		return c.get(ctx, key, tags, load)
	}
	flight := "near\x00" + strconv.FormatUint(epoch, 10) + "\x00" + key
	return c.await(ctx, flight, func(fctx context.Context) ([]byte, error) {
		v, err := c.get(fctx, key, tags, load)
		switch {
		case err == nil:
			c.near.put(epoch, started, key, tags, v, false)
		case errors.Is(err, ErrNotFound):
			c.near.put(epoch, started, key, tags, nil, true)
		}
		return v, err
	})
}

// Invalidation messages, published by the write scripts and Delete.
const (
	keyMessage = "key "
	tagMessage = "tag "
)

// channel is the Pub/Sub channel of invalidations. It stays an ordinary
// channel (PUBLISH, SUBSCRIBE) on a Redis Cluster too, unlike the stock
// changes (inventory's sharded channels): every process's near cache
// needs every invalidation, whichever key it is about, so the message
// must reach all of them whatever node they listen on, which is what a
// cluster's PUBLISH does (broadcast over the bus), and invalidations come
// with catalog writes, rare next to stock changes. A sharded channel would
// also have to share the slot of each script's keys, which here are any
// key's. PUBLISH inside a script is not checked against its keys' slot.
func (c *Cache) channel() string { return c.o.Prefix + "invalidations" }

// Run holds this process's subscription to the invalidations of other
// processes until ctx ends; the near cache stores nothing without it. It
// returns at once when the near cache is off.
func (c *Cache) Run(ctx context.Context) {
	if c.near == nil {
		return
	}
	ps := c.rdb.Subscribe(ctx, c.channel())
	defer ps.Close()
	defer c.near.reset(false)
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-ch:
			switch m := m.(type) {
			case *redis.Message:
				c.hear(m.Payload)
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					// Messages sent while we were away are lost: start over.
					c.near.reset(true)
				}
			}
		}
	}
}

// hear applies one invalidation message.
// It counts the message once applied, so that a test that saw the count
// may rely on the drop.
func (c *Cache) hear(payload string) {
	defer c.m.nearMessages.Inc()
	if k, ok := strings.CutPrefix(payload, keyMessage); ok {
		c.near.dropKey(k)
		return
	}
	if t, ok := strings.CutPrefix(payload, tagMessage); ok {
		c.near.dropTag(t)
		return
	}
	// Unknown: from a newer version of the program. Dropping everything
	// is always safe.
	c.near.reset(true)
}

// dropNear forgets key here after a write, when the near cache is on.
func (c *Cache) dropNear(key string) {
	if c.near != nil {
		c.near.dropKey(key)
	}
}

// NearListening reports whether the near cache is on and hears other
// processes' invalidations (Run has subscribed): only then does it store.
func (c *Cache) NearListening() bool {
	if c.near == nil {
		return false
	}
	c.near.mu.Lock()
	defer c.near.mu.Unlock()
	return c.near.ready
}
