package database

import (
	"context"
	"fmt"
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
// are short so that an outage turns into a quick 503, not a hung request.
func OpenRedis(ctx context.Context, url string, o RedisOptions) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: invalid SHOP_REDIS_URL: %w", err)
	}
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	opts.PoolTimeout = 3 * time.Second
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
