package cache

import (
	"context"
	_ "embed"
	"fmt"
)

// Prefetched reads: the Redis read of Get run by the caller, inside a script
// call of its own that does other work in the same round trip (the shop's
// product read runs it with the rate limiter's window and the live stock:
// internal/onetrip).
// More in docs/design/cache.md ("prefetch.go").

//go:embed read.lua
var readLua string

// ReadLua is the prefetched read's script. It takes the keys of
// Prefetch.Keys and no arguments; its reply is what GetJSONPrefetched
// reads.
func ReadLua() string { return readLua }

// Prefetch is a read of one key, with its tags, for the caller to run.
type Prefetch struct {
	c    *Cache
	key  string
	tags []string
}

// Prefetch returns the read of key with tags (see Get) for the caller to
// run with ReadLua.
func (c *Cache) Prefetch(key string, tags []string) Prefetch {
	return Prefetch{c: c, key: key, tags: tags}
}

// Keys are the read script's keys: the entry, the key's generation and
// each tag's.
func (p Prefetch) Keys() []string {
	keys := make([]string, 0, 2+len(p.tags))
	keys = append(keys, p.c.entryKey(p.key), p.c.genKey(p.key))
	for _, t := range p.tags {
		keys = append(keys, p.c.tagGenKey(t))
	}
	return keys
}

// snapshot reads the read script's reply.
func (p Prefetch) snapshot(reply any) (snapshot, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 2+len(p.tags) {
		return snapshot{}, fmt.Errorf("cache: read script answered %v for %s", reply, p.key)
	}
	var snap snapshot
	for i, v := range vals {
		var b string
		switch v := v.(type) {
		case string:
			b = v
		case nil: // false: no such key
		default:
			return snapshot{}, fmt.Errorf("cache: read script answered %v for %s", reply, p.key)
		}
		if i == 0 {
			snap.value, snap.found = []byte(b), v != nil
			continue
		}
		snap.gens = append(snap.gens, b)
	}
	return snap, nil
}

// GetJSONPrefetched is GetJSONShared answering from reply, the read
// script's answer for p, instead of a read of its own (see above). A reply
// it cannot read is counted as a Redis error of the read and answered as
// GetJSONShared would.
func GetJSONPrefetched[T any](ctx context.Context, p Prefetch, reply any, load func(context.Context) (T, error)) (T, error) {
	c := p.c
	snap, err := p.snapshot(reply)
	if err != nil {
		c.m.errors.WithLabelValues("get").Inc()
		return GetJSONShared(ctx, c, p.key, p.tags, load)
	}
	return decodeJSON(ctx, c, p.key, load, true, func(l Loader) ([]byte, error) {
		return c.answer(ctx, p.key, p.tags, snap, l)
	})
}
