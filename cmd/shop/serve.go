package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/shop"
	"github.com/shop-oss/shop/internal/telemetry"
)

func newServeCmd(a *app) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API and an order writer (applies migrations first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			return a.serve(cmd.Context(), cfg, o)
		},
	}
	cmd.Flags().BoolVar(&o.writer, "writer", true, "also run an order writer in this process")
	cmd.Flags().StringVar(&o.pprofAddr, "pprof-addr", "", "serve the Go profiler (/debug/pprof/) on this separate address, e.g. 127.0.0.1:6060 (off when empty)")
	o.wf.register(cmd)
	readsSettings(cmd, allSettings)
	// Hidden: for the fault drills only, and refused outside SHOP_ENV=dev.
	cmd.Flags().StringVar(&o.sagaFault, "saga-fault", "", "SIGKILL this process mid-saga: after-hold|after-commit|before-finish:N (SHOP_ENV=dev only)")
	_ = cmd.Flags().MarkHidden("saga-fault")
	cmd.Flags().StringVar(&o.drawFault, "draw-fault", "", "SIGKILL this process mid-draw: after-capture:N (SHOP_ENV=dev only)")
	_ = cmd.Flags().MarkHidden("draw-fault")
	return cmd
}

type serveOptions struct {
	writer    bool
	pprofAddr string
	sagaFault string
	drawFault string
	wf        writerFlags
}

// stores are the open connections a command works with.
type stores struct {
	redis redis.UniversalClient // one server, or a cluster (SHOP_REDIS_CLUSTER)
	db    *pgxpool.Pool
	// cache is the catalog cache's own Redis (SHOP_CACHE_REDIS_URL); nil
	// when the cache lives in redis.
	cache *redis.Client
}

// shop is the stores as the application takes them.
func (s *stores) shop() shop.Stores {
	st := shop.Stores{DB: s.db, Redis: s.redis}
	if s.cache != nil {
		st.Cache = s.cache
	}
	return st
}

func (s *stores) Close() {
	if s.redis != nil {
		_ = s.redis.Close()
	}
	if s.cache != nil {
		_ = s.cache.Close()
	}
	if s.db != nil {
		s.db.Close()
	}
}

// startTracing turns OpenTelemetry tracing on when the OTEL_* variables
// ask for it (telemetry.Start), before the stores open, so that their
// clients are instrumented; stop flushes the spans still queued.
func startTracing(ctx context.Context, log *slog.Logger) (stop func(), err error) {
	on, shutdown, err := telemetry.Start(ctx, "shop")
	if err != nil || !on {
		return func() {}, err
	}
	log.Info("tracing on: exporting spans over OTLP")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("tracing: spans not flushed", "err", err)
		}
	}, nil
}

// openStores connects to Redis and PostgreSQL and fails fast, naming the
// store, when either does not answer or Redis may evict keys; outside
// development it warns when Redis keeps no append-only file.
func openStores(ctx context.Context, cfg *config.Config, log *slog.Logger) (*stores, error) {
	// go-redis logs pool dial failures through a package-level logger;
	// route it into ours instead of raw lines on stderr.
	redis.SetLogger(redisLogger{log})
	rdb, err := database.OpenUniversal(ctx, cfg.RedisURL, cfg.RedisCluster, database.RedisOptions{PoolSize: cfg.RedisPoolSize})
	if err != nil {
		return nil, err
	}
	if err := database.CheckNoEviction(ctx, rdb, log); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	if !cfg.Dev() {
		database.WarnWithoutAOF(ctx, rdb, log)
	}
	var tracers []pgx.QueryTracer
	if telemetry.Active() {
		// Each Redis command and each query a child span of its caller's.
		if err := telemetry.InstrumentRedis(rdb); err != nil {
			_ = rdb.Close()
			return nil, fmt.Errorf("tracing redis: %w", err)
		}
		tracers = append(tracers, otelpgx.NewTracer())
	}
	db, err := database.OpenPostgres(ctx, cfg.DatabaseURL, tracers...)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &stores{redis: rdb, db: db}, nil
}

// openCache connects to the catalog cache's own Redis when
// SHOP_CACHE_REDIS_URL is set. It holds only copies of PostgreSQL rows,
// so unlike the main Redis it may evict (allkeys-lru): it is not checked
// for noeviction. Filling it can then never take the room that stock,
// orders and sessions need.
func (s *stores) openCache(ctx context.Context, cfg *config.Config) error {
	if cfg.CacheRedisURL == "" {
		return nil
	}
	rdb, err := database.OpenRedis(ctx, cfg.CacheRedisURL, database.RedisOptions{PoolSize: cfg.RedisPoolSize})
	if err != nil {
		return fmt.Errorf("SHOP_CACHE_REDIS_URL: %w", err)
	}
	s.cache = rdb
	return nil
}

// openMigrated opens the stores (the catalog cache's own Redis too, when
// there is one) and applies the migrations: what every command that works
// on the stores starts with. The caller closes the stores.
func openMigrated(ctx context.Context, cfg *config.Config, log *slog.Logger) (*stores, error) {
	st, err := openStores(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if err := st.openCache(ctx, cfg); err != nil {
		st.Close()
		return nil, err
	}
	n, err := database.Migrate(ctx, st.db)
	if err != nil {
		st.Close()
		return nil, err
	}
	if n > 0 {
		log.Info("migrations applied", "count", n)
	}
	if err := orderkey.SettlePartitions(ctx, st.redis, cfg.KeyPrefix, cfg.Partitions()); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// onStores runs fn with the configuration, the logger and the stores
// open (and migrated when migrate is set): how every command that works on
// the stores but serves nothing starts; the stores are closed after fn.
func (a *app) onStores(ctx context.Context, migrate bool, fn func(cfg *config.Config, log *slog.Logger, st *stores) error) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	log := a.logger(cfg)
	open := openStores
	if migrate {
		open = openMigrated
	}
	st, err := open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(cfg, log, st)
}

func (a *app) serve(ctx context.Context, cfg *config.Config, o serveOptions) error {
	crash, err := parseSagaFault(o.sagaFault, cfg)
	if err != nil {
		return err
	}
	drawCrash, err := parseDrawFault(o.drawFault, cfg)
	if err != nil {
		return err
	}
	generated, err := cfg.EnsureJWTSecret()
	if err != nil {
		return err
	}
	log := a.serverLogger(cfg)
	stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	if generated {
		log.Warn("SHOP_ENV=dev: using a random SHOP_JWT_SECRET; tokens stop working when the process restarts")
	}
	st, err := openMigrated(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()

	reg := newRegistry()
	sh := shop.New(cfg, st.shop(), log, reg)
	if crash != nil {
		crash.inject(sh.Saga, log)
	}
	if drawCrash != nil {
		drawCrash.inject(sh.Draws, log)
	}
	stopJobs := sh.Start(ctx)
	defer stopJobs()
	fapp := sh.Fiber

	if o.pprofAddr != "" {
		stop, err := servePprof(o.pprofAddr, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on SHOP_ADDR %s: %w", cfg.Addr, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fapp.Listener(server.Listener(ln)) }()
	log.Info("listening", "addr", ln.Addr().String(), "version", version)

	stopWriter := func() error { return nil }
	if o.writer {
		stopWriter = startWriter(ctx, newWriter(st, cfg, log, reg, o.wf, sh.Bestsellers))
	}

	select {
	case err := <-errc:
		_ = stopWriter()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
	// Live streams never end by themselves: told to reconnect elsewhere
	// and closed first, they do not hold the drain below.
	sh.StopStreams()
	if err := fapp.ShutdownWithTimeout(cfg.ShutdownTimeout); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown", "err", err)
	}
	// The writer stops after the API: orders accepted while draining are
	// still in its reach; it finishes the batch in hand.
	if err := stopWriter(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// startWriter runs w in the background; the returned function stops it
// (after its batch in hand) and waits. It is not stopped by ctx itself, so
// that it outlives the API's drain.
func startWriter(ctx context.Context, w *writer.Writer) func() error {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// redisLogger adapts go-redis's internal logging to slog.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
