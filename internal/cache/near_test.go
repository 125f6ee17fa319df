package cache_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/racetest"
	"github.com/shop-oss/shop/internal/testenv"
)

// hour is a near TTL no test outlives: what a test sees after a change
// is then the invalidations' doing, never the TTL's.
const hour = time.Hour

// listening runs c's subscription until t ends and waits until it hears.
func listening(t *testing.T, c *testCache) *testCache {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the near cache to subscribe", c.NearListening)
	return c
}

// waitFor polls cond until it holds; after 10 s the test fails (a hang,
// not a slow answer: nothing here measures time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
	}
}

// heard waits until c has heard n invalidations from other processes.
func heard(t *testing.T, c *testCache, n float64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%v invalidations to be heard", n), func() bool {
		return c.metric(t, "shop_cache_near_messages_total") >= n
	})
}

// set writes v through for key on c, as the catalog writes.
func set(t *testing.T, c *testCache, s *source, key, v string, tags ...string) {
	t.Helper()
	ctx := context.Background()
	f := c.Fence(ctx, key)
	s.set(v, false)
	if err := c.Set(ctx, f, []byte(v), tags...); err != nil {
		t.Fatal(err)
	}
}

// TestNearHitNeedsNoRedis: a second read in the near TTL is answered in
// process, even when Redis has changed behind the cache; with the near
// cache off (NearTTL 0) every read is Redis's, as before.
func TestNearHitNeedsNoRedis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want string
		hits float64
	}{
		{"on", hour, "old", 1},
		{"off", 0, "behind", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCache(t, cache.Options{NearTTL: tc.ttl})
			if tc.ttl > 0 {
				listening(t, c)
			}
			s := newSource("old")
			if v, _ := get(t, c, "k", nil, s); v != "old" {
				t.Fatalf("first read %q", v)
			}
			// Behind the cache's back: no write, no invalidation.
			c.rdb.Set(context.Background(), c.prefix+"entry:{k}", "+behind", time.Minute)
			if v, _ := get(t, c, "k", nil, s); v != tc.want {
				t.Errorf("second read %q, want %q", v, tc.want)
			}
			if h := c.metric(t, "shop_cache_near_requests_total", "result", "hit"); h != tc.hits {
				t.Errorf("near hits = %v, want %v", h, tc.hits)
			}
		})
	}
}

// TestNearStoresNothingUntilSubscribed: without the subscription a near
// entry could outlive another process's write by the whole TTL.
func TestNearStoresNothingUntilSubscribed(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{NearTTL: hour})
	s := newSource("v")
	get(t, c, "k", nil, s)
	get(t, c, "k", nil, s)
	if h := c.metric(t, "shop_cache_near_requests_total", "result", "hit"); h != 0 {
		t.Errorf("near hits = %v before Run subscribed", h)
	}
}

// TestNearInvalidationAcrossProcesses: a write-through, a delete or a tag
// invalidation in one process drops the entries near-cached by another
// once it has heard the message (the TTL is an hour: only the message can
// do it), and the writer's own near entries at once.
func TestNearInvalidationAcrossProcesses(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	o := cache.Options{Prefix: r.Prefix, NearTTL: hour}
	w, rd := listening(t, newCacheOn(t, r.Client, o)), listening(t, newCacheOn(t, r.Client, o))
	s := newSource("v1")
	list := newSource("list-1")
	for _, c := range []*testCache{w, rd} {
		get(t, c, "k", nil, s)
		get(t, c, "list", []string{"cat"}, list)
	}
	set(t, w, s, "k", "v2")
	if v, _ := get(t, w, "k", nil, s); v != "v2" {
		t.Errorf("the writer reads %q after its own write", v)
	}
	heard(t, rd, 1)
	if v, _ := get(t, rd, "k", nil, s); v != "v2" {
		t.Errorf("the other process reads %q after the write was heard", v)
	}

	list.set("list-2", false)
	if err := w.InvalidateTag(context.Background(), "cat"); err != nil {
		t.Fatal(err)
	}
	heard(t, rd, 2)
	if v, _ := get(t, rd, "list", []string{"cat"}, list); v != "list-2" {
		t.Errorf("tagged entry after the invalidation was heard: %q", v)
	}

	f := w.Fence(context.Background(), "k")
	s.set("", true)
	if err := w.Delete(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	heard(t, rd, 3)
	if v, found := get(t, rd, "k", nil, s); found {
		t.Errorf("deleted entry still read as %q", v)
	}
}

// TestNearIsBounded: the near cache keeps at most NearSize entries, the
// least recently used leaving first.
func TestNearIsBounded(t *testing.T) {
	t.Parallel()
	c := listening(t, newTestCache(t, cache.Options{NearTTL: hour, NearSize: 2}))
	s := newSource("v")
	for _, k := range []string{"a", "b", "a", "c"} { // c pushes out b, the least recent
		get(t, c, k, nil, s)
	}
	before := c.metric(t, "shop_cache_near_requests_total", "result", "hit") // "a" once
	get(t, c, "a", nil, s)
	get(t, c, "c", nil, s)
	get(t, c, "b", nil, s)
	if hits := c.metric(t, "shop_cache_near_requests_total", "result", "hit") - before; hits != 2 {
		t.Errorf("near hits of a, c, b = %v, want 2 (b evicted)", hits)
	}
}

// heldReads is a Redis hook that holds the next read pipeline of the
// cache after its reply came back, until released: the fill has read the
// old entry from Redis and not yet stored it near.
type heldReads struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (h *heldReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *heldReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (h *heldReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		// The cache's read: GET of the entry first (not a connection's
		// set-up pipeline).
		read := len(cmds) > 0 && cmds[0].Name() == "get" && strings.Contains(fmt.Sprint(cmds[0].Args()...), "entry:")
		if read && h.armed.CompareAndSwap(true, false) {
			close(h.held)
			<-h.release
		}
		return err
	}
}

// TestNearFillRacingAnInvalidation: a near fill that read the old entry
// from Redis, then heard (or made) the invalidation of a write before
// storing it, must not store it: else the old value would be served for
// the whole TTL (an hour here).
func TestNearFillRacingAnInvalidation(t *testing.T) {
	t.Parallel()
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			t.Parallel()
			r := testenv.NewRedis(t)
			hook := &heldReads{held: make(chan struct{}), release: make(chan struct{})}
			slow := redis.NewClient(r.Client.Options())
			slow.AddHook(hook)
			t.Cleanup(func() { _ = slow.Close() })
			o := cache.Options{Prefix: r.Prefix, NearTTL: hour}
			rd := listening(t, newCacheOn(t, slow, o))
			w := rd
			if !local {
				w = newCacheOn(t, r.Client, o)
			}
			s := newSource("")
			set(t, w, s, "k", "old") // in Redis, not near anywhere
			if !local {
				heard(t, rd, 1)
			}
			hook.armed.Store(true)
			stale := make(chan string, 1)
			go func() {
				b, _ := rd.Get(context.Background(), "k", nil, s.load)
				stale <- string(b)
			}()
			<-hook.held // read "old" from Redis, not stored near yet
			set(t, w, s, "k", "new")
			if !local {
				heard(t, rd, 2)
			}
			close(hook.release)
			if v := <-stale; v != "old" {
				t.Fatalf("the held fill read %q", v)
			}
			if v, _ := get(t, rd, "k", nil, s); v != "new" {
				t.Errorf("after the held fill: %q, want new (a stale near entry for the TTL)", v)
			}
		})
	}
}

// TestNearReadersRacingWrites: readers of one process, released together
// with a writer in another, never keep an older value near once the last
// write's invalidation is heard; every read returns a value that was
// written.
func TestNearReadersRacingWrites(t *testing.T) {
	t.Parallel()
	const writes = 50
	r := testenv.NewRedis(t)
	o := cache.Options{Prefix: r.Prefix, NearTTL: hour}
	w, rd := newCacheOn(t, r.Client, o), listening(t, newCacheOn(t, r.Client, o))
	s := newSource("v0")
	set(t, w, s, "k", "v0")
	heard(t, rd, 1)
	var stop atomic.Bool
	var bad atomic.Value
	wait := racetest.Start(racetest.Times(16, func(int) {
		for !stop.Load() {
			b, err := rd.Get(context.Background(), "k", nil, s.load)
			if err != nil || len(b) < 2 || b[0] != 'v' {
				bad.Store(fmt.Sprintf("%q %v", b, err))
			}
		}
	})...)
	for i := 1; i <= writes; i++ {
		set(t, w, s, "k", fmt.Sprintf("v%d", i))
	}
	heard(t, rd, writes+1)
	stop.Store(true)
	wait()
	if b := bad.Load(); b != nil {
		t.Fatalf("a read returned %s", b)
	}
	want := fmt.Sprintf("v%d", writes)
	for range 3 {
		if v, _ := get(t, rd, "k", nil, s); v != want {
			t.Fatalf("after every write was heard: %q, want %q", v, want)
		}
	}
}

// TestGetJSONSharedDecodesOnce: near hits of GetJSONShared hand out the
// value decoded the first time, and a write drops it with its entry.
func TestGetJSONSharedDecodesOnce(t *testing.T) {
	t.Parallel()
	c := listening(t, newTestCache(t, cache.Options{NearTTL: hour}))
	type doc struct{ N int }
	var loads atomic.Int32
	load := func(context.Context) (doc, error) { loads.Add(1); return doc{N: 1}, nil }
	ctx := context.Background()
	for range 3 {
		if v, err := cache.GetJSONShared(ctx, c.Cache, "k", nil, load); err != nil || v.N != 1 {
			t.Fatalf("read %+v %v", v, err)
		}
	}
	if hits := c.metric(t, "shop_cache_near_requests_total", "result", "hit"); hits != 2 || loads.Load() != 1 {
		t.Errorf("near hits = %v, loads = %d; want 2 and 1", hits, loads.Load())
	}
	if err := cache.SetJSON(ctx, c.Cache, c.Fence(ctx, "k"), doc{N: 2}); err != nil {
		t.Fatal(err)
	}
	if v, err := cache.GetJSONShared(ctx, c.Cache, "k", nil, load); err != nil || v.N != 2 {
		t.Errorf("after a write: %+v %v, want N 2", v, err)
	}
}
