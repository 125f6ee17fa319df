package loadtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// stores are the server's Redis and PostgreSQL, opened when the config
// names them (nil otherwise; its methods accept nil).
type stores struct {
	rdb    *redis.Client
	db     *pgxpool.Pool
	layout Layout // where the server under test keeps its keys
}

func openStores(ctx context.Context, cfg Config) (*stores, error) {
	if cfg.RedisURL == "" {
		return nil, nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: %w", err)
	}
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", opts.Addr, err)
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
