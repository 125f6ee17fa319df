// Package cache is a Redis cache for data whose system of record lives
// elsewhere: cache-aside reads with a jittered TTL, write-through writes,
// tag invalidation and a stampede guard. It knows no domain key: callers
// hand it keys, tags and loaders.
//
// The reasoning behind it is in docs/design/cache.md.
package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

// ErrNotFound, returned (or wrapped) by a loader, says the item does not
// exist. It is cached for Options.NegativeTTL, and Get then returns it
// without loading, until a Set replaces it.
var ErrNotFound = errors.New("cache: not found")

// Options tune a Cache. Zero values take the defaults in parentheses.
type Options struct {
	// Prefix starts every Redis key the cache writes.
	Prefix string
	// TTL is the base lifetime of an entry (5m).
	TTL time.Duration
	// Jitter spreads TTLs uniformly over TTL·(1±Jitter); 0 to 1 (0).
	Jitter float64
	// NegativeTTL is the lifetime of a cached ErrNotFound (5s).
	NegativeTTL time.Duration
	// LockTTL bounds how long a crashed filler can hold a key's lock (2s).
	LockTTL time.Duration
	// LockWait is how long a miss waits for another process's fill before
	// it loads by itself (250ms).
	LockWait time.Duration
	// Timeout bounds each Redis round trip (500ms).
	Timeout time.Duration
	// LoadTimeout bounds each loader call (3s).
	LoadTimeout time.Duration
	// NearTTL turns the in-process near cache on (see near.go) and bounds
	// how long a near entry is served; 0: off, every read goes to Redis.
	NearTTL time.Duration
	// NearSize bounds the near cache's entries (10000).
	NearSize int
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.TTL, 5*time.Minute)
	def(&o.NegativeTTL, 5*time.Second)
	def(&o.LockTTL, 2*time.Second)
	def(&o.LockWait, 250*time.Millisecond)
	def(&o.Timeout, 500*time.Millisecond)
	def(&o.LoadTimeout, 3*time.Second)
	o.Jitter = min(max(o.Jitter, 0), 1)
	return o
}

// Loader loads the bytes of an item from the system of record. It returns
// ErrNotFound when the item does not exist.
type Loader func(ctx context.Context) ([]byte, error)

// Cache is safe for concurrent use. Make it with New.
type Cache struct {
	rdb   redis.UniversalClient
	o     Options
	group singleflight.Group
	m     *metrics
	near  *near // nil: off
	memo  *decodedMemo
}

// New returns a cache on rdb. Its metrics are registered on reg (none when
// reg is nil); it panics if they are already registered there.
func New(rdb redis.UniversalClient, o Options, reg prometheus.Registerer) *Cache {
	c := &Cache{rdb: rdb, o: o.withDefaults(), m: newMetrics(reg), memo: newDecodedMemo(decodedMemoSize)}
	if c.o.NearTTL > 0 {
		c.near = newNear(c.o.NearTTL, c.o.NearSize)
	}
	return c
}

// Get returns the cached bytes for key, or loads, stores and returns them
// on a miss. tags are attached to a stored entry (see InvalidateTag). It
// returns ErrNotFound when the item does not exist, the loader's error when
// a load fails, and ctx's error when ctx ends first. Redis errors are
// counted, never returned. The bytes returned may be shared with other
// callers: never modify them. With the near cache on (Options.NearTTL) a
// recent read in this process answers without Redis (near.go).
func (c *Cache) Get(ctx context.Context, key string, tags []string, load Loader) ([]byte, error) {
	if c.near != nil {
		return c.nearGet(ctx, key, tags, load)
	}
	return c.get(ctx, key, tags, load)
}

// get is Get from Redis.
func (c *Cache) get(ctx context.Context, key string, tags []string, load Loader) ([]byte, error) {
	snap, err := c.read(ctx, key, tags)
	if err != nil {
		c.m.errors.WithLabelValues("get").Inc()
		return c.await(ctx, "down\x00"+key, func(fctx context.Context) ([]byte, error) {
			e, err := c.load(fctx, load)
			return e.result(err)
		})
	}
	return c.answer(ctx, key, tags, snap, load)
}

// answer is Get's answer from what its read saw: the entry when it has
// one, else a fill under the generations it saw.
func (c *Cache) answer(ctx context.Context, key string, tags []string, snap snapshot, load Loader) ([]byte, error) {
	if snap.found {
		if v, err := decodeEntry(snap.value); !errors.Is(err, errCorrupt) {
			c.m.hits.Inc()
			return v, err
		}
		c.drop(ctx, key)
	}
	c.m.misses.Inc()
	flight := key + "\x00" + strings.Join(snap.gens, "\x00")
	return c.await(ctx, flight, func(fctx context.Context) ([]byte, error) {
		return c.fill(fctx, key, tags, snap.gens, load)
	})
}

// await runs f once per flight key however many callers wait for it. f runs
// detached from the caller's cancellation (one caller giving up must not
// fail the others) but bounded by LoadTimeout plus the lock wait (and
// the round trips: a near miss's flight holds a Redis read and a fill's).
func (c *Cache) await(ctx context.Context, flight string, f func(context.Context) ([]byte, error)) ([]byte, error) {
	ch := c.group.DoChan(flight, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.LoadTimeout+c.o.LockWait+3*c.o.Timeout)
		defer cancel()
		return f(fctx)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]byte), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// GetJSON is Get for a value stored as JSON.
func GetJSON[T any](ctx context.Context, c *Cache, key string, tags []string, load func(context.Context) (T, error)) (T, error) {
	return getJSON(ctx, c, key, tags, load, false)
}

// GetJSONShared is GetJSON whose near hits skip the decoding: the value
// decoded once is kept with the near entry and handed to every reader of
// it, so T must be one its callers only read (no slice or map they could
// change under the others).
func GetJSONShared[T any](ctx context.Context, c *Cache, key string, tags []string, load func(context.Context) (T, error)) (T, error) {
	if c.near != nil {
		if d, ok := c.near.decoded(key, time.Now()); ok {
			if v, ok := d.(T); ok {
				c.m.nearHits.Inc()
				return v, nil
			}
		}
	}
	return getJSON(ctx, c, key, tags, load, true)
}

func getJSON[T any](ctx context.Context, c *Cache, key string, tags []string, load func(context.Context) (T, error), shared bool) (T, error) {
	return decodeJSON(ctx, c, key, load, shared, func(l Loader) ([]byte, error) { return c.Get(ctx, key, tags, l) })
}

// decodeJSON decodes what get answers with load's value as JSON. shared
// says callers only read the value (GetJSONShared, GetJSONPrefetched): it
// is then taken from the decoded memo when get answers the bytes it was
// decoded from (decoded.go), and kept there and with the near entry.
func decodeJSON[T any](ctx context.Context, c *Cache, key string, load func(context.Context) (T, error), shared bool,
	get func(Loader) ([]byte, error)) (T, error) {
	var v T
	b, err := get(func(ctx context.Context) ([]byte, error) {
		lv, err := load(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(lv)
	})
	if err != nil {
		return v, err
	}
	if shared {
		if d, ok := c.memo.get(key, b); ok {
			if v, ok := d.(T); ok {
				c.keepNear(key, b, v)
				return v, nil
			}
		}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		// An entry written by another version of the program: drop it and
		// answer from the loader.
		c.drop(ctx, key)
		c.dropNear(key)
		ctx, cancel := context.WithTimeout(ctx, c.o.LoadTimeout)
		defer cancel()
		c.m.loads.Inc()
		return load(ctx)
	}
	if shared {
		c.memo.put(key, b, v)
		c.keepNear(key, b, v)
	}
	return v, nil
}

// keepNear keeps v, decoded from b, with key's near entry, if the near
// cache is on.
func (c *Cache) keepNear(key string, b []byte, v any) {
	if c.near != nil {
		c.near.keepDecoded(key, b, v)
	}
}

// drop deletes an entry that cannot be decoded. Dropping an entry is always
// safe, so it needs no generation.
func (c *Cache) drop(ctx context.Context, key string) {
	c.m.errors.WithLabelValues("decode").Inc()
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	if err := c.rdb.Del(ctx, c.entryKey(key)).Err(); err != nil {
		c.m.errors.WithLabelValues("delete").Inc()
	}
}

// ttl is the base TTL spread uniformly over ±Jitter.
func (c *Cache) ttl() time.Duration {
	if c.o.Jitter == 0 {
		return c.o.TTL
	}
	f := 1 + c.o.Jitter*(2*rand.Float64()-1)
	return max(time.Duration(float64(c.o.TTL)*f), time.Millisecond)
}

// maxTTL outlives every entry; tag sets and generations live this long so
// that they cover every entry and every fill in flight.
func (c *Cache) maxTTL() time.Duration {
	return time.Duration(float64(c.o.TTL)*(1+c.o.Jitter)) + time.Minute
}

func (c *Cache) entryKey(key string) string { return c.o.Prefix + "entry:{" + key + "}" }
func (c *Cache) genKey(key string) string   { return c.o.Prefix + "gen:{" + key + "}" }
func (c *Cache) lockKey(key string) string  { return c.o.Prefix + "lock:{" + key + "}" }
func (c *Cache) tagKey(tag string) string   { return c.o.Prefix + "tag:{" + tag + "}" }
func (c *Cache) tagGenKey(tag string) string {
	return c.o.Prefix + "taggen:{" + tag + "}"
}

// token is a random generation or lock owner id. It needs uniqueness, not
// secrecy.
func token() string { return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()) }

func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
