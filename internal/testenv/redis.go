package testenv

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Redis is a client plus a key prefix private to one test.
type Redis struct {
	Client *redis.Client
	URL    string
	// Prefix starts every key the test writes; it ends with ':'.
	Prefix string
}

// NewRedis connects to the test Redis and reserves a prefix for t. Every key
// under the prefix is deleted when t ends.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	u := RedisURL(t)
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("parse %s: %v", envRedis, err)
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("test Redis at %s: %v", opts.Addr, err)
	}
	r := &Redis{Client: rdb, URL: u, Prefix: "test:" + uniqueName(t) + ":"}
	t.Cleanup(func() {
		DeletePrefix(t, rdb, r.Prefix)
		_ = rdb.Close()
	})
	return r
}

// DeletePrefix removes every key starting with prefix, using SCAN (never
// KEYS, which blocks the server).
func DeletePrefix(t testing.TB, rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			rdb.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		rdb.Unlink(ctx, batch...)
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleaning test keys %s*: %v", prefix, err)
	}
}
