package cache

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// unlinkBatch bounds one pipeline of UNLINKs when a tag is dropped.
const unlinkBatch = 500

var (
	//go:embed invalidate.lua
	invalidateLua    string
	invalidateScript = redis.NewScript(invalidateLua)
)

// InvalidateTag drops every entry stored with tag. It first replaces the
// tag's generation, so that fills of tagged entries that loaded before the
// call are not stored, and takes the tag's member set in the same atomic
// step, so that an entry tagged meanwhile lands in a fresh set instead of
// being forgotten. Then it unlinks the members, one key per command so that
// the keys may live in different cluster slots. It returns a Redis error;
// entries it could not drop expire with their TTL.
func (c *Cache) InvalidateTag(ctx context.Context, tag string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*c.o.Timeout)
	defer cancel()
	members, err := invalidateScript.Run(ctx, c.rdb, []string{c.tagGenKey(tag), c.tagKey(tag)},
		token(), ms(c.maxTTL()), c.channel(), tagMessage+tag).StringSlice()
	if c.near != nil { // after the Redis step, as in Set
		c.near.dropTag(tag)
	}
	if err != nil {
		c.m.errors.WithLabelValues("invalidate").Inc()
		return fmt.Errorf("cache: invalidate tag %s: %w", tag, err)
	}
	c.m.invalidations.Inc()
	for len(members) > 0 {
		n := min(len(members), unlinkBatch)
		if err := c.unlink(ctx, members[:n]); err != nil {
			c.m.errors.WithLabelValues("invalidate").Inc()
			return fmt.Errorf("cache: invalidate tag %s: %w", tag, err)
		}
		members = members[n:]
	}
	return nil
}

func (c *Cache) unlink(ctx context.Context, keys []string) error {
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	return err
}
