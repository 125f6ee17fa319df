package cache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/testenv"
)

// testCache is a cache on the test Redis under a private prefix, with its
// own metrics registry.
type testCache struct {
	*cache.Cache
	rdb    *redis.Client
	prefix string
	reg    *prometheus.Registry
}

func newTestCache(t *testing.T, o cache.Options) *testCache {
	t.Helper()
	r := testenv.NewRedis(t)
	o.Prefix = r.Prefix
	return newCacheOn(t, r.Client, o)
}

// newCacheOn makes another cache on the same Redis and prefix: a second
// process as far as the cache can tell.
func newCacheOn(t *testing.T, rdb *redis.Client, o cache.Options) *testCache {
	t.Helper()
	reg := prometheus.NewRegistry()
	return &testCache{Cache: cache.New(rdb, o, reg), rdb: rdb, prefix: o.Prefix, reg: reg}
}

// metric sums the counters named name whose labels include the given
// name/value pairs.
func (c *testCache) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := c.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m.GetLabel(), labels) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func hasLabels(have []*dto.LabelPair, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range have {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// source stands for the system of record: a value, a load counter, and an
// optional gate that holds the first load after it has read the value, so a
// test can write between a fill's read and its store.
type source struct {
	mu      sync.Mutex
	value   string
	missing bool
	loads   atomic.Int32
	delay   time.Duration
	held    chan struct{} // closed once the first load has read and waits
	release chan struct{} // closing it lets the held load return
	once    sync.Once
}

func newSource(value string) *source { return &source{value: value} }

// hold makes the next load wait, after reading the value, until resume.
func (s *source) hold() {
	s.held, s.release = make(chan struct{}), make(chan struct{})
}

func (s *source) resume() { close(s.release) }

func (s *source) set(v string, missing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.value, s.missing = v, missing
}

func (s *source) load(ctx context.Context) ([]byte, error) {
	s.loads.Add(1)
	s.mu.Lock()
	v, missing := s.value, s.missing
	s.mu.Unlock()
	if s.held != nil {
		first := false
		s.once.Do(func() { first = true })
		if first {
			close(s.held)
			select {
			case <-s.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	if missing {
		return nil, cache.ErrNotFound
	}
	return []byte(v), nil
}

// get reads key and fails the test on an error other than ErrNotFound.
func get(t *testing.T, c *testCache, key string, tags []string, s *source) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := c.Get(ctx, key, tags, s.load)
	if errors.Is(err, cache.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return string(b), true
}
