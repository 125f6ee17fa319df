package cache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/cache"
)

// startGet runs a Get in the background whose load is held after reading
// the source, and waits until it is held.
func startGet(t *testing.T, c *testCache, key string, tags []string, s *source) <-chan string {
	t.Helper()
	s.hold()
	out := make(chan string, 1)
	go func() {
		b, err := c.Get(context.Background(), key, tags, s.load)
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		out <- string(b)
	}()
	select {
	case <-s.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the load never started")
	}
	return out
}

// TestStaleFillLosesTheRace: a fill that read the old value before a
// write-through must not store it after the write.
func TestStaleFillLosesTheRace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		write func(ctx context.Context, c *testCache, f cache.Fence, s *source) error
		want  string // what a read after the stale fill returns
	}{
		{"set", func(ctx context.Context, c *testCache, f cache.Fence, s *source) error {
			s.set("new", false)
			return c.Set(ctx, f, []byte("new"))
		}, "new"},
		{"delete", func(ctx context.Context, c *testCache, f cache.Fence, s *source) error {
			s.set("", true)
			return c.Delete(ctx, f)
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCache(t, cache.Options{})
			ctx := context.Background()
			s := newSource("old")
			stale := startGet(t, c, "k", nil, s) // has read "old", not stored yet
			f := c.Fence(ctx, "k")
			if err := tc.write(ctx, c, f, s); err != nil {
				t.Fatal(err)
			}
			// A read that starts after the write returns sees it, without
			// joining the stale fill still in flight.
			if v, _ := get(t, c, "k", nil, s); v != tc.want {
				t.Fatalf("read after write = %q, want %q", v, tc.want)
			}
			s.resume()
			if v := <-stale; v != "old" {
				t.Fatalf("the stale fill returned %q", v)
			}
			if v, _ := get(t, c, "k", nil, s); v != tc.want {
				t.Errorf("after the stale fill's store: %q, want %q (stale value resurrected)", v, tc.want)
			}
		})
	}
}

// TestInvalidateTagDefeatsAFillInFlight: a listing loaded before an
// invalidation must not be stored after it.
func TestInvalidateTagDefeatsAFillInFlight(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{})
	s := newSource("old-list")
	stale := startGet(t, c, "list", []string{"cat"}, s)
	s.set("new-list", false)
	if err := c.InvalidateTag(context.Background(), "cat"); err != nil {
		t.Fatal(err)
	}
	s.resume()
	<-stale
	if v, _ := get(t, c, "list", []string{"cat"}, s); v != "new-list" {
		t.Errorf("after invalidation: %q, want new-list", v)
	}
}

// TestRacingWritersLeaveNoOldValue: two writers whose cache steps land in
// the opposite order of their database writes must not leave the older
// value cached.
func TestRacingWritersLeaveNoOldValue(t *testing.T) {
	t.Parallel()
	c := newTestCache(t, cache.Options{})
	ctx := context.Background()
	s := newSource("v0")
	get(t, c, "k", nil, s)
	fa, fb := c.Fence(ctx, "k"), c.Fence(ctx, "k")
	s.set("a", false) // A commits first
	s.set("b", false) // then B
	if err := c.Set(ctx, fb, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, fa, []byte("a")); err != nil { // A's cache step lands last
		t.Fatal(err)
	}
	if v, _ := get(t, c, "k", nil, s); v != "b" {
		t.Errorf("Get = %q, want b (the last committed value)", v)
	}
}

// TestStampede: concurrent misses of one key run the loader once per
// process, and once overall when two processes share the Redis.
func TestStampede(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		processes int
		readers   int
	}{
		{"one_process", 1, 200},
		{"two_processes", 2, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A generous LockWait and Timeout: the waiting process must see
			// the fill, not give up (or time out taking the lock and load
			// anyway, as it should in production), even on a busy machine.
			o := cache.Options{LockWait: 5 * time.Second, Timeout: 5 * time.Second, LockTTL: 10 * time.Second}
			first := newTestCache(t, o)
			o.Prefix = first.prefix
			caches := []*testCache{first}
			for len(caches) < tc.processes {
				caches = append(caches, newCacheOn(t, first.rdb, o))
			}
			s := newSource("v")
			s.delay = 100 * time.Millisecond
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan string, tc.readers*tc.processes)
			for _, c := range caches {
				for range tc.readers {
					wg.Go(func() {
						<-start
						b, err := c.Get(context.Background(), "hot", nil, s.load)
						if err != nil || string(b) != "v" {
							errs <- string(b) + " " + errString(err)
						}
					})
				}
			}
			close(start)
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Errorf("a reader got %q", e)
			}
			if n := s.loads.Load(); n != 1 {
				t.Errorf("loads = %d, want 1", n)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
