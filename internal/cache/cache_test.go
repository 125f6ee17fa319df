package cache_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/cache"
)

func TestGetMissThenHit(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{})
	s := newSource("v1")
	if v, ok := get(t, c, "k", nil, s); !ok || v != "v1" {
		t.Fatalf("first Get = %q %v", v, ok)
	}
	s.set("v2", false) // changed behind the cache's back: a hit must not see it
	if v, _ := get(t, c, "k", nil, s); v != "v1" {
		t.Fatalf("second Get = %q, want the cached v1", v)
	}
	if n := s.loads.Load(); n != 1 {
		t.Errorf("loads = %d, want 1", n)
	}
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"shop_cache_requests_total", []string{"result", "miss"}, 1},
		{"shop_cache_requests_total", []string{"result", "hit"}, 1},
		{"shop_cache_loads_total", nil, 1},
		{"shop_cache_errors_total", nil, 0},
	} {
		if got := c.metric(t, m.name, m.labels...); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

func TestTTLIsJittered(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{TTL: 100 * time.Second, Jitter: 0.2})
	ctx := context.Background()
	seen := map[time.Duration]bool{}
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		get(t, c, key, nil, newSource("v"))
		ttl := c.rdb.PTTL(ctx, c.prefix+"entry:{"+key+"}").Val()
		if ttl < 79*time.Second || ttl > 120*time.Second {
			t.Fatalf("TTL %s outside 100s±20%%", ttl)
		}
		seen[ttl.Round(100*time.Millisecond)] = true
	}
	if len(seen) < 5 {
		t.Errorf("20 TTLs took only %d distinct values: not jittered", len(seen))
	}
}

func TestNotFoundIsCachedBrieflyAndSetClearsIt(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{NegativeTTL: 3 * time.Second})
	s := newSource("")
	s.set("", true)
	for range 2 {
		if _, ok := get(t, c, "k", nil, s); ok {
			t.Fatal("Get found a missing item")
		}
	}
	if n := s.loads.Load(); n != 1 {
		t.Errorf("loads = %d, want 1 (the miss is cached)", n)
	}
	if ttl := c.rdb.PTTL(context.Background(), c.prefix+"entry:{k}").Val(); ttl <= 0 || ttl > 3*time.Second {
		t.Errorf("negative entry TTL = %s, want ≤ 3s", ttl)
	}
	ctx := context.Background()
	f := c.Fence(ctx, "k")
	s.set("created", false)
	if err := c.Set(ctx, f, []byte("created")); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, c, "k", nil, s); !ok || v != "created" {
		t.Fatalf("after Set: %q %v, want created at once", v, ok)
	}
}

func TestLoaderErrorsAreNotCached(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{})
	boom := errors.New("database down")
	calls := 0
	load := func(context.Context) ([]byte, error) { calls++; return nil, boom }
	for range 2 {
		if _, err := c.Get(context.Background(), "k", nil, load); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the loader's", err)
		}
	}
	if calls != 2 {
		t.Errorf("loader calls = %d, want 2", calls)
	}
}

func TestGetJSONAndSetJSON(t *testing.T) {
	t.Parallel()
	type item struct {
		Name  string `json:"name"`
		Price int64  `json:"price"`
	}
	c := newTestCache(t, cache.Options{})
	ctx := context.Background()
	load := func(context.Context) (item, error) { return item{"a", 5}, nil }
	if v, err := cache.GetJSON(ctx, c.Cache, "j", nil, load); err != nil || v != (item{"a", 5}) {
		t.Fatalf("GetJSON = %+v %v", v, err)
	}
	if err := cache.SetJSON(ctx, c.Cache, c.Fence(ctx, "j"), item{"b", 7}); err != nil {
		t.Fatal(err)
	}
	if v, err := cache.GetJSON(ctx, c.Cache, "j", nil, load); err != nil || v != (item{"b", 7}) {
		t.Fatalf("after SetJSON = %+v %v", v, err)
	}
	// An entry another program version wrote is dropped and reloaded.
	c.rdb.Set(ctx, c.prefix+"entry:{j}", "+[1,2]", time.Minute)
	if v, err := cache.GetJSON(ctx, c.Cache, "j", nil, load); err != nil || v != (item{"a", 5}) {
		t.Fatalf("undecodable entry: %+v %v", v, err)
	}
	if c.metric(t, "shop_cache_errors_total", "op", "decode") != 1 {
		t.Error("the undecodable entry was not counted")
	}
}

func TestInvalidateTagDropsTaggedEntriesOnly(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{})
	ctx := context.Background()
	src := map[string]*source{}
	tags := map[string][]string{"list:a": {"cat:a"}, "list:ab": {"cat:a", "cat:b"}, "list:b": {"cat:b"}, "item": nil}
	for key, tg := range tags {
		src[key] = newSource("old")
		get(t, c, key, tg, src[key])
		src[key].set("new", false)
	}
	if err := c.InvalidateTag(ctx, "cat:a"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"list:a": "new", "list:ab": "new", "list:b": "old", "item": "old"}
	for key, w := range want {
		if v, _ := get(t, c, key, tags[key], src[key]); v != w {
			t.Errorf("%s = %q after invalidating cat:a, want %q", key, v, w)
		}
	}
	if n := c.rdb.Exists(ctx, c.prefix+"tag:{cat:a}").Val(); n != 1 {
		t.Error("the refilled entries are not in a fresh tag set")
	}
	if got := c.metric(t, "shop_cache_invalidations_total"); got != 1 {
		t.Errorf("invalidations = %v, want 1", got)
	}
}

func TestEveryKeyHasATTL(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{})
	ctx := context.Background()
	get(t, c, "a", []string{"t"}, newSource("v"))
	_ = c.Set(ctx, c.Fence(ctx, "b"), []byte("v"), "t")
	_ = c.Delete(ctx, c.Fence(ctx, "a"))
	_ = c.InvalidateTag(ctx, "u")
	keys := scanKeys(t, c.rdb, c.prefix+"*")
	if len(keys) < 4 {
		t.Fatalf("keys = %v", keys)
	}
	for _, k := range keys {
		if ttl := c.rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s has no TTL (%s)", k, ttl)
		}
	}
}

func TestRedisDownReadsFromTheLoader(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	c := newCacheOn(t, dead, cache.Options{Prefix: "dead:"})
	ctx := context.Background()
	s := newSource("from-db")
	start := time.Now()
	for range 3 {
		if v, ok := get(t, c, "k", []string{"t"}, s); !ok || v != "from-db" {
			t.Fatalf("Get = %q %v, want the loader's value", v, ok)
		}
	}
	s.set("", true)
	if _, ok := get(t, c, "k", nil, s); ok {
		t.Error("a missing item was found")
	}
	if n := s.loads.Load(); n != 4 {
		t.Errorf("loads = %d, want one per read", n)
	}
	if got := c.metric(t, "shop_cache_errors_total", "op", "get"); got != 4 {
		t.Errorf("errors{op=get} = %v, want 4", got)
	}
	if err := c.Set(ctx, c.Fence(ctx, "k"), []byte("x")); err == nil {
		t.Error("Set on a dead Redis returned nil")
	}
	if err := c.InvalidateTag(ctx, "t"); err == nil {
		t.Error("InvalidateTag on a dead Redis returned nil")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s with Redis down", d)
	}
}

// scanKeys lists the keys matching pattern with SCAN (never KEYS, which
// blocks a Redis that other tests share).
func scanKeys(t *testing.T, rdb *redis.Client, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}
