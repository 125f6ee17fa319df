package cache

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// pollInterval is how often a miss that lost the lock re-reads the entry.
const pollInterval = 10 * time.Millisecond

var (
	//go:embed store.lua
	storeLua    string
	storeScript = redis.NewScript(storeLua)
)

// snapshot is what one read saw: the entry, if any, and the generations of
// the key and of each tag, in that order ("" when one has none).
type snapshot struct {
	value []byte
	found bool
	gens  []string
}

// read fetches the entry and the generations in one round trip.
func (c *Cache) read(ctx context.Context, key string, tags []string) (snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	pipe := c.rdb.Pipeline()
	entry := pipe.Get(ctx, c.entryKey(key))
	gens := []*redis.StringCmd{pipe.Get(ctx, c.genKey(key))}
	for _, t := range tags {
		gens = append(gens, pipe.Get(ctx, c.tagGenKey(t)))
	}
	_, _ = pipe.Exec(ctx) // each command's own error is checked below
	var snap snapshot
	var err error
	snap.value, snap.found, err = bytesOf(entry)
	if err != nil {
		return snapshot{}, fmt.Errorf("cache: read %s: %w", key, err)
	}
	for _, g := range gens {
		b, _, err := bytesOf(g)
		if err != nil {
			return snapshot{}, fmt.Errorf("cache: read %s: %w", key, err)
		}
		snap.gens = append(snap.gens, string(b))
	}
	return snap, nil
}

// bytesOf is a GET's value; a missing key is not an error.
func bytesOf(cmd *redis.StringCmd) ([]byte, bool, error) {
	b, err := cmd.Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return b, true, nil
}

// fill is one miss's work: wait for the key's lock or for another
// process's entry, load, store if the generations are unchanged.
func (c *Cache) fill(ctx context.Context, key string, tags, gens []string, load Loader) ([]byte, error) {
	lk, value, found := c.acquire(ctx, key)
	if found {
		if v, err := decodeEntry(value); !errors.Is(err, errCorrupt) {
			return v, err
		}
	}
	defer c.release(ctx, lk)
	e, err := c.load(ctx, load)
	if e.ok() {
		c.store(ctx, key, tags, gens, e)
	}
	return e.result(err)
}

// load calls the loader under LoadTimeout and turns its answer into an
// entry. A not-found answer is an entry too (a negative one).
func (c *Cache) load(ctx context.Context, load Loader) (entry, error) {
	c.m.loads.Inc()
	ctx, cancel := context.WithTimeout(ctx, c.o.LoadTimeout)
	defer cancel()
	b, err := load(ctx)
	switch {
	case errors.Is(err, ErrNotFound):
		return negativeEntry, nil
	case err != nil:
		return nil, err
	}
	return positiveEntry(b), nil
}

// store writes e if the key's and the tags' generations are still those
// read before the load; otherwise a write or an invalidation happened
// meanwhile and the loaded value may be stale, so it is dropped.
func (c *Cache) store(ctx context.Context, key string, tags, gens []string, e entry) {
	ttl := c.ttl()
	if e.negative() {
		ttl = c.o.NegativeTTL
	}
	keys := make([]string, 0, 2+2*len(tags))
	keys = append(keys, c.entryKey(key), c.genKey(key))
	for _, t := range tags {
		keys = append(keys, c.tagGenKey(t))
	}
	for _, t := range tags {
		keys = append(keys, c.tagKey(t))
	}
	args := make([]any, 0, 3+len(gens))
	args = append(args, []byte(e), ms(ttl), ms(c.maxTTL()))
	for _, g := range gens {
		args = append(args, g)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	if err := storeScript.Run(ctx, c.rdb, keys, args...).Err(); err != nil {
		c.m.errors.WithLabelValues("store").Inc()
	}
}

// entry is a stored value: '+' and the bytes, or '-' for not found.
type entry []byte

var negativeEntry = entry("-")

func positiveEntry(b []byte) entry { return append(entry("+"), b...) }

func (e entry) ok() bool       { return len(e) > 0 }
func (e entry) negative() bool { return len(e) > 0 && e[0] == '-' }

func (e entry) result(err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return decodeEntry(e)
}

func decodeEntry(b []byte) ([]byte, error) {
	switch {
	case len(b) > 0 && b[0] == '+':
		return b[1:], nil
	case len(b) > 0 && b[0] == '-':
		return nil, ErrNotFound
	}
	return nil, errCorrupt
}

// errCorrupt is an entry this package did not write; it is treated as a miss.
var errCorrupt = errors.New("cache: corrupt entry")
