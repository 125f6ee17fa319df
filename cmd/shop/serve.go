package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/server"
)

// catalogTTL is the base lifetime of cached catalog entries: writes keep
// them current, so the TTL only bounds staleness after a failed cache step
// and the memory of entries nobody reads.
const catalogTTL = 5 * time.Minute

func newServeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API (applies migrations first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			return a.serve(cmd.Context(), cfg)
		},
	}
}

// stores are the open connections a command works with.
type stores struct {
	redis *redis.Client
	db    *pgxpool.Pool
}

func (s *stores) Close() {
	if s.redis != nil {
		_ = s.redis.Close()
	}
	if s.db != nil {
		s.db.Close()
	}
}

// openStores connects to Redis and PostgreSQL and fails fast, naming the
// store, when either does not answer.
func openStores(ctx context.Context, cfg *config.Config, log *slog.Logger) (*stores, error) {
	// go-redis logs pool dial failures through a package-level logger;
	// route it into ours instead of raw lines on stderr.
	redis.SetLogger(redisLogger{log})
	rdb, err := database.OpenRedis(ctx, cfg.RedisURL, database.RedisOptions{PoolSize: cfg.RedisPoolSize})
	if err != nil {
		return nil, err
	}
	db, err := database.OpenPostgres(ctx, cfg.DatabaseURL)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &stores{redis: rdb, db: db}, nil
}

func (a *app) serve(ctx context.Context, cfg *config.Config) error {
	generated, err := cfg.EnsureJWTSecret()
	if err != nil {
		return err
	}
	log := a.logger(cfg)
	if generated {
		log.Warn("SHOP_ENV=dev: using a random SHOP_JWT_SECRET; tokens stop working when the process restarts")
	}
	st, err := openStores(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if n, err := database.Migrate(ctx, st.db); err != nil {
		return err
	} else if n > 0 {
		log.Info("migrations applied", "count", n)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	catalogCache := cache.New(st.redis, cache.Options{Prefix: cfg.KeyPrefix + "cache:", TTL: catalogTTL, Jitter: 0.1}, reg)
	catalog := inventory.NewCatalog(st.db, st.redis, catalogCache, cfg.KeyPrefix, log)
	fapp := server.New(server.Deps{
		Log:            log,
		Redis:          st.redis,
		DB:             st.db,
		Registry:       reg,
		BodyLimit:      cfg.BodyLimit,
		TrustedProxies: cfg.TrustedProxies,
		Mount: []func(fiber.Router){
			func(r fiber.Router) {
				// Public reads only until internal/auth lands: a nil guard
				// leaves the admin routes unmounted (fail closed).
				catalog.Routes(r, nil) // MERGE(auth): pass authSvc.RequireAdmin() instead of nil.
			},
		},
	})

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on SHOP_ADDR %s: %w", cfg.Addr, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fapp.Listener(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "version", version)

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
	if err := fapp.ShutdownWithTimeout(cfg.ShutdownTimeout); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown", "err", err)
	}
	log.Info("stopped")
	return nil
}

// redisLogger adapts go-redis's internal logging to slog.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "msg", fmt.Sprintf(format, v...))
}
