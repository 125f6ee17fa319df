package loadtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database"
)

// stores are the server's Redis and PostgreSQL, opened when the config
// names them (nil otherwise; its methods accept nil).
type stores struct {
	rdb    redis.UniversalClient
	db     *pgxpool.Pool
	layout Layout // where the server under test keeps its keys
}

func openStores(ctx context.Context, cfg Config) (*stores, error) {
	if cfg.RedisURL == "" {
		return nil, nil
	}
	rdb, addr, err := openRedis(cfg)
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	db, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err == nil {
		err = db.Ping(ctx)
	}
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	layout, err := LayoutOf(ctx, rdb, cfg.KeyPrefix)
	if err != nil {
		_ = rdb.Close()
		db.Close()
		return nil, err
	}
	return &stores{rdb: rdb, db: db, layout: layout}, nil
}

// openRedis is a client of the server's Redis, a cluster client when
// cfg says so. Commands are never resent: the checks only read, and a read
// that failed should say so rather than be retried into a timeout.
func openRedis(cfg Config) (rdb redis.UniversalClient, addr string, err error) {
	if cfg.RedisCluster {
		opts, err := database.ParseClusterURL(cfg.RedisURL)
		if err != nil {
			return nil, "", fmt.Errorf("--redis-url: %w", err)
		}
		opts.MaxRetries = -1
		return redis.NewClusterClient(opts), strings.Join(opts.Addrs, ","), nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, "", fmt.Errorf("--redis-url: %w", err)
	}
	opts.MaxRetries = -1
	return redis.NewClient(opts), opts.Addr, nil
}

func (s *stores) close() {
	if s != nil {
		_ = s.rdb.Close()
		s.db.Close()
	}
}

// sample starts sampling the live stock of sku (nil without stores).
func (s *stores) sample(cfg Config, sku string) *StockSampler {
	if s == nil {
		return nil
	}
	return SampleStockIn(s.rdb, s.layout, sku, 20*time.Millisecond)
}

// stopped is Stop, and nil for a nil sampler.
func (sm *StockSampler) stopped() *Samples {
	if sm == nil {
		return nil
	}
	return sm.Stop()
}
