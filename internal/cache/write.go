package cache

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed write.lua
	writeLua    string
	writeScript = redis.NewScript(writeLua)
)

// Fence is a key's generation as read before a write to the system of
// record. Pass it to Set or Delete once that write is done.
type Fence struct {
	key string
	gen string
	// ok is false when the generation could not be read; Set then drops
	// the entry instead of storing, which is always safe.
	ok bool
}

// Fence reads key's generation. Call it before writing the system of record.
// A Redis error is counted and gives a fence that makes Set drop the entry.
func (c *Cache) Fence(ctx context.Context, key string) Fence {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	gen, _, err := bytesOf(c.rdb.Get(ctx, c.genKey(key)))
	if err != nil {
		c.m.errors.WithLabelValues("fence").Inc()
		return Fence{key: key}
	}
	return Fence{key: key, gen: string(gen), ok: true}
}

// Set writes value through for the fenced key, with tags, and bumps the
// key's generation so that fills loaded before the write are not stored.
// If another writer bumped the generation since the fence was taken, the
// entry is dropped instead: which of the two values is newer cannot be told
// here, and the next read loads the current one. It returns a Redis error.
func (c *Cache) Set(ctx context.Context, f Fence, value []byte, tags ...string) error {
	if !f.ok {
		return c.Delete(ctx, f)
	}
	keys := make([]string, 0, 2+len(tags))
	keys = append(keys, c.entryKey(f.key), c.genKey(f.key))
	for _, t := range tags {
		keys = append(keys, c.tagKey(t))
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	err := writeScript.Run(ctx, c.rdb, keys, []byte(positiveEntry(value)), ms(c.ttl()),
		f.gen, token(), ms(c.maxTTL()), c.channel(), keyMessage+f.key).Err()
	// After the Redis step, so that a near fill that starts now reads the
	// new entry; whether or not it failed, since it may have landed.
	c.dropNear(f.key)
	if err != nil {
		c.m.errors.WithLabelValues("set").Inc()
		return fmt.Errorf("cache: set %s: %w", f.key, err)
	}
	return nil
}

// SetJSON is Set for a value stored as JSON.
func SetJSON[T any](ctx context.Context, c *Cache, f Fence, v T, tags ...string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cache: encode %s: %w", f.key, err)
	}
	return c.Set(ctx, f, b, tags...)
}

// Delete drops the fenced key's entry and bumps its generation, so that no
// fill loaded before the delete can store the deleted item again. It
// returns a Redis error.
func (c *Cache) Delete(ctx context.Context, f Fence) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, c.entryKey(f.key))
		p.Set(ctx, c.genKey(f.key), token(), c.maxTTL())
		p.Publish(ctx, c.channel(), keyMessage+f.key)
		return nil
	})
	c.dropNear(f.key) // after the Redis step, as in Set
	if err != nil {
		c.m.errors.WithLabelValues("delete").Inc()
		return fmt.Errorf("cache: delete %s: %w", f.key, err)
	}
	c.m.invalidations.Inc()
	return nil
}
