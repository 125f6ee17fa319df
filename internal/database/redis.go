package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions tunes the client beyond what the URL says.
type RedisOptions struct {
	// PoolSize is the number of connections; handlers waiting for a free
	// connection are the first bottleneck of a flash sale (see BENCHMARKS.md).
	PoolSize int
}

// OpenRedis builds a client for url and checks that Redis answers. Timeouts
// are short so that an outage turns into a quick 503, not a hung request:
// each call is bounded by its context's deadline (the timeouts callers set,
// 500 ms to 2 s) and by the 2 s read and write timeouts, whichever is
// sooner; see the package doc for what that makes of each route.
func OpenRedis(ctx context.Context, url string, o RedisOptions) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: invalid SHOP_REDIS_URL: %w", err)
	}
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	opts.PoolTimeout = 3 * time.Second
	// No silent retries: go-redis would resend a command whose reply was
	// lost to a reset connection, and most of ours are not idempotent (a
	// reservation without an Idempotency-Key, an XREADGROUP that already
	// delivered entries, a cart increment). The error surfaces instead: a
	// 503 the client retries with its Idempotency-Key, or the writer's
	// re-read of its own pending entries.
	opts.MaxRetries = -1
	// Without it go-redis ignores the context's deadline on the socket and
	// waits for ReadTimeout: a stalled Redis cost every call 2 s whatever
	// its caller's timeout (catalog reads took 6 s). With it the socket's
	// deadline is the earlier of the two. A call that times out closes its
	// connection (its reply may still come), and, with MaxRetries -1, is
	// never resent.
	opts.ContextTimeoutEnabled = true
	if o.PoolSize > 0 {
		opts.PoolSize = o.PoolSize
	}
	rdb := redis.NewClient(opts)
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis unreachable at %s: %w", opts.Addr, err)
	}
	return rdb, nil
}

// CheckNoEviction refuses a Redis whose maxmemory-policy is not noeviction.
// Every key the shop writes is live state (stock, buyer counts, orders,
// idempotency records, sessions) and all carry TTLs, so allkeys-* and
// volatile-* policies alike may drop them silently: oversell, reset
// per-user limits, lost or duplicate orders.
//
// Managed Redis often renames CONFIG or denies it by ACL; then the policy
// cannot be read, and CheckNoEviction logs a warning on log and returns nil
// rather than keep the shop from starting.
//
// On a Redis Cluster every master is checked: any of them may hold a SKU.
func CheckNoEviction(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	return OnEveryServer(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		return checkNoEviction(ctx, node, log)
	})
}

func checkNoEviction(ctx context.Context, rdb *redis.Client, log *slog.Logger) error {
	addr := rdb.Options().Addr
	cctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	reply, err := rdb.ConfigGet(cctx, "maxmemory-policy").Result()
	var refused redis.Error
	switch {
	case errors.As(err, &refused):
		log.Warn("could not verify that Redis maxmemory-policy is noeviction (CONFIG GET refused); "+
			"make sure it is, or Redis may evict stock counters, orders and sessions",
			"addr", addr, "err", err.Error())
		return nil
	case err != nil:
		return fmt.Errorf("redis at %s: reading maxmemory-policy: %w", addr, err)
	}
	policy, ok := reply["maxmemory-policy"]
	switch {
	case !ok:
		// A proxy or Redis-compatible server that does not report it.
		log.Warn("could not verify that Redis maxmemory-policy is noeviction (CONFIG GET returned no value); "+
			"make sure it is, or Redis may evict stock counters, orders and sessions", "addr", addr)
		return nil
	case policy != "noeviction":
		return fmt.Errorf("redis at %s has maxmemory-policy %s, which may evict stock counters, orders and sessions: "+
			"set maxmemory-policy noeviction (see deploy/redis.conf)", addr, policy)
	}
	return nil
}

// WarnWithoutAOF logs one warning when Redis runs with appendonly no: a
// 202 then means a reservation and its order event that a Redis restart
// loses (and every session). It is a warning, not a refusal like
// CheckNoEviction's, since a cache-only or throwaway Redis may be meant
// that way; callers skip it in development. A Redis that will not tell
// (CONFIG refused, as CheckNoEviction already says) gets no second line.
// On a Redis Cluster each master without AOF gets its line.
func WarnWithoutAOF(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) {
	_ = OnEveryServer(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		warnWithoutAOF(ctx, node, log)
		return nil
	})
}

func warnWithoutAOF(ctx context.Context, rdb *redis.Client, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	reply, err := rdb.ConfigGet(cctx, "appendonly").Result()
	if err != nil || reply["appendonly"] != "no" {
		return
	}
	log.Warn("Redis runs with appendonly no: a Redis restart loses accepted orders, stock counts and sessions; "+
		"set appendonly yes and appendfsync always (see deploy/redis.conf)", "addr", rdb.Options().Addr)
}

// OnEveryServer runs fn on the one server of a single-node client, or on
// every master of a cluster (concurrently; the first error is returned).
func OnEveryServer(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.Client:
		return fn(ctx, c)
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	}
	return fmt.Errorf("redis: unsupported client %T", rdb)
}
