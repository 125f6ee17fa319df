package cache_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/testenv"
)

// Prefetched reads (prefetch.go): the caller runs ReadLua in a script call
// of its own, and the cache answers from the reply as Get answers from its
// own read.

var readScript = redis.NewScript(cache.ReadLua())

// commandCounter counts the commands a client sends.
type commandCounter struct{ n atomic.Int64 }

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, c)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// prefetchCache is a cache whose client counts its commands.
func prefetchCache(t *testing.T) (*testCache, *commandCounter) {
	t.Helper()
	r := testenv.NewRedis(t)
	rdb := redis.NewClient(r.Client.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	var n commandCounter
	rdb.AddHook(&n)
	return newCacheOn(t, rdb, cache.Options{Prefix: r.Prefix}), &n
}

// prefetch runs the read script for key and tags, as a caller would
// inside its own script.
func prefetch(t *testing.T, c *testCache, key string, tags []string) (cache.Prefetch, any) {
	t.Helper()
	p := c.Prefetch(key, tags)
	reply, err := readScript.Run(context.Background(), c.rdb, p.Keys()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p, reply
}

// getPrefetched answers p from reply, loading s's value as a JSON string.
func getPrefetched(t *testing.T, p cache.Prefetch, reply any, s *source) string {
	t.Helper()
	v, err := cache.GetJSONPrefetched(context.Background(), p, reply, func(ctx context.Context) (string, error) {
		b, err := s.load(ctx)
		return string(b), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type reads struct{ hits, misses, loads float64 }

func readsOf(t *testing.T, c *testCache) reads {
	t.Helper()
	return reads{
		hits:   c.metric(t, "shop_cache_requests_total", "result", "hit"),
		misses: c.metric(t, "shop_cache_requests_total", "result", "miss"),
		loads:  c.metric(t, "shop_cache_loads_total"),
	}
}

// A prefetched miss fills (one load, counted as a miss) and the next
// prefetched read is a hit that sends nothing to Redis.
func TestPrefetchedMissFillsThenHits(t *testing.T) {
	t.Parallel()
	c, sent := prefetchCache(t)
	s := newSource("one")
	p, reply := prefetch(t, c, "k", []string{"t"})
	if v := getPrefetched(t, p, reply, s); v != "one" {
		t.Fatalf("miss answered %q", v)
	}
	if got := readsOf(t, c); got != (reads{0, 1, 1}) {
		t.Fatalf("after the miss: %+v", got)
	}
	p, reply = prefetch(t, c, "k", []string{"t"})
	before := sent.n.Load()
	if v := getPrefetched(t, p, reply, s); v != "one" {
		t.Fatalf("hit answered %q", v)
	}
	if n := sent.n.Load() - before; n != 0 {
		t.Fatalf("a prefetched hit sent %d commands, want 0", n)
	}
	if got := readsOf(t, c); got != (reads{1, 1, 1}) {
		t.Fatalf("after the hit: %+v", got)
	}
}

// A write or a tag invalidation is seen by the next prefetched read.
func TestPrefetchedReadSeesWrites(t *testing.T) {
	t.Parallel()
	c, _ := prefetchCache(t)
	ctx := context.Background()
	s := newSource("one")
	p, reply := prefetch(t, c, "k", []string{"t"})
	getPrefetched(t, p, reply, s)
	if err := cache.SetJSON(ctx, c.Cache, c.Fence(ctx, "k"), "two", "t"); err != nil {
		t.Fatal(err)
	}
	p, reply = prefetch(t, c, "k", []string{"t"})
	if v := getPrefetched(t, p, reply, s); v != "two" {
		t.Fatalf("after the write: %q", v)
	}
	s.set("three", false)
	if err := c.InvalidateTag(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	p, reply = prefetch(t, c, "k", []string{"t"})
	if v := getPrefetched(t, p, reply, s); v != "three" {
		t.Fatalf("after the invalidation: %q", v)
	}
}

// A prefetched miss fills under the generations its script saw: a write
// (here a delete, which leaves no entry for the fill to find) or an
// invalidation made between the script and the fill's store keeps the
// value loaded from before it out of the cache (the stale-set race), for
// the key's generation and a tag's alike.
func TestPrefetchedFillIsFenced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(c *testCache) error
	}{
		{"key_deleted", func(c *testCache) error {
			ctx := context.Background()
			return c.Delete(ctx, c.Fence(ctx, "k"))
		}},
		{"tag_invalidated", func(c *testCache) error { return c.InvalidateTag(context.Background(), "t") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := prefetchCache(t)
			s := newSource("old")
			p, reply := prefetch(t, c, "k", []string{"t"}) // a miss
			if err := tc.write(c); err != nil {
				t.Fatal(err)
			}
			if v := getPrefetched(t, p, reply, s); v != "old" {
				t.Fatalf("the fill answered %q, want what it loaded", v)
			}
			s.set("new", false)
			p, reply = prefetch(t, c, "k", []string{"t"})
			if v := getPrefetched(t, p, reply, s); v != "new" {
				t.Fatalf("the next read answered %q, want \"new\": the fenced fill stored", v)
			}
		})
	}
}

// A reply that is not the read script's is counted as a read error and
// answered by a read of the cache's own.
func TestPrefetchedBadReplyReadsAgain(t *testing.T) {
	t.Parallel()
	c, _ := prefetchCache(t)
	s := newSource("one")
	if v := getPrefetched(t, c.Prefetch("k", nil), []any{"only one"}, s); v != "one" {
		t.Fatalf("answered %q", v)
	}
	if n := c.metric(t, "shop_cache_errors_total", "op", "get"); n != 1 {
		t.Fatalf("read errors %v, want 1", n)
	}
	if got := readsOf(t, c); got != (reads{0, 1, 1}) {
		t.Fatalf("reads %+v, want the own read's miss", got)
	}
}
