// Package shop wires every domain onto the HTTP server: the one place that
// knows which services exist, how they are built from the stores and the
// configuration, and which routes each mounts behind which guard. `shop
// serve` runs what New builds, and the HTTP tests of every domain build the
// same application through shoptest, so a test exercises the wiring that
// production runs rather than a hand-made copy of it.
//
// internal/server assembles the Fiber app (middleware order, health,
// metrics, problem+json) and knows no domain; the domains' code takes only
// its request helpers (Decode, the query parsers), never the app. This
// package sits above both.
package shop

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	adminpage "github.com/shop-oss/shop/internal/admin"
	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/autopipe"
	"github.com/shop-oss/shop/internal/bestseller"
	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/cart"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/draw"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/live"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/orderhttp"
	"github.com/shop-oss/shop/internal/order/saga"
	"github.com/shop-oss/shop/internal/order/sweeper"
	"github.com/shop-oss/shop/internal/payment"
	"github.com/shop-oss/shop/internal/pickup"
	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/room"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/storefront"
	"github.com/shop-oss/shop/internal/visitor"
	"github.com/shop-oss/shop/internal/webpage"
)

// CatalogTTL is the base lifetime of cached catalog entries: writes keep
// them current, so the TTL only bounds staleness after a failed cache step
// and the memory of entries nobody reads.
const CatalogTTL = 5 * time.Minute

// Stores are the connections the application runs on.
type Stores struct {
	DB    *pgxpool.Pool
	Redis redis.UniversalClient
	// Cache is the catalog cache's own Redis (SHOP_CACHE_REDIS_URL); nil:
	// the cache lives in Redis with the live state.
	Cache redis.UniversalClient
}

// cache is the Redis the catalog cache uses.
func (st Stores) cache() redis.UniversalClient {
	if st.Cache != nil {
		return st.Cache
	}
	return st.Redis
}

// App is the wired application: the Fiber app and the services behind it.
type App struct {
	Fiber       *fiber.App
	Auth        *auth.Service
	Catalog     *inventory.Catalog
	Stock       *inventory.Stock
	Sales       *inventory.Sales
	Orders      *order.Service
	Carts       *cart.Service
	Locks       *lock.Locker
	Bestsellers *bestseller.Service
	Visits      *visitor.Service
	Stores      *pickup.Service
	// Rooms runs the sale rounds' waiting rooms; Start runs its admitter.
	Rooms *room.Service
	// Saga places the orders on a Redis Cluster (nil on a single Redis).
	Saga *saga.Placer
	// Sweeper expires unpaid orders; Start runs it.
	Sweeper *sweeper.Sweeper
	Audit   *audit.Auditor
	// Draws runs the rounds that are draws; Start runs its runner.
	Draws *draw.Service
	// Webhook applies Stripe's events (nil with another provider).
	Webhook *payment.Webhook
	// Live streams live stock to browsers; Start runs its subscription,
	// and serve shuts it down before the HTTP server (see Live.Shutdown).
	Live *live.Hub
	// catalogCache is the catalog's cache; Start runs its near cache's
	// subscription to other instances' invalidations.
	catalogCache *cache.Cache
	// view is the product reads' stock view, kept by Live's subscription
	// (nil: off).
	view *inventory.StockView
	near bool // the near cache is on
	// auditEvery is SHOP_AUDIT_INTERVAL: Start audits on that schedule.
	auditEvery time.Duration
	log        *slog.Logger
}

// Listening reports whether the subscriptions Start runs for the product
// reads are up: the near cache hears other instances' invalidations and
// the stock view the stock changes (each counts as up when it is off).
// Until then both answer from Redis.
func (a *App) Listening() bool {
	return (a.view == nil || a.view.Listening()) &&
		(!a.near || a.catalogCache.NearListening())
}

// purchaseRedis is the auto-pipeliner the purchase path's scripts run on
// when SHOP_REDIS_PIPELINE is set (BENCHMARKS.md), nil otherwise or when
// the client cannot pipeline (it is logged). Closing st.Redis closes it.
func purchaseRedis(cfg *config.Config, st Stores, log *slog.Logger) redis.Scripter {
	if !cfg.RedisPipeline {
		return nil
	}
	p, err := autopipe.New(st.Redis, autopipe.Options{
		Batches: cfg.RedisPipelineBatches, Delay: cfg.RedisPipelineDelay, Adaptive: cfg.RedisPipelineAdaptive})
	if err != nil {
		log.Warn("SHOP_REDIS_PIPELINE: auto-pipelining unavailable, the purchase path runs unpipelined", "err", err)
		return nil
	}
	return p
}

// newTrips runs the requests' checks (internal/onetrip): the per-IP
// window, with the session check riding along on one Redis. A route that
// rides (Ride, RidePublic) runs them with its first Redis step unless
// SHOP_REDIS_ONE_TRIP is off or the keys cannot share a call (a cluster);
// a product read only when its document and stock come from the
// limiter's Redis in a script call, not from the cache's own Redis
// (SHOP_CACHE_REDIS_URL) nor from memory (SHOP_NEAR_CACHE_TTL > 0), and
// the limiter is on: with the limit off a read keeps its own reads and
// their deadlines. With the limit off the checks count nothing, and a
// purchase's session check still rides with its reservation.
func newTrips(cfg *config.Config, st Stores, authSvc *auth.Service, purchases redis.Scripter,
	clientIP func(*fiber.Ctx) string, log *slog.Logger, reg *prometheus.Registry) *onetrip.Trips {
	limiter := ratelimit.New(st.Redis, cfg.KeyPrefix, cfg.RateLimit.Limit, cfg.RateLimit.Window)
	if purchases != nil {
		limiter.RunOn(purchases)
	}
	return onetrip.New(onetrip.Config{
		Limiter: limiter, Auth: authSvc, Redis: st.Redis, Run: purchases,
		Options: server.LimiterOptions(reg, log, clientIP, cfg.RateLimit.Off()),
		OneTrip: cfg.RedisOneTrip,
		Reads:   cfg.RedisOneTrip && st.Cache == nil && cfg.NearCacheTTL <= 0 && !cfg.RateLimit.Off(),
	})
}

// indexStartTimeout bounds the pickup store index rebuild at start.
const indexStartTimeout = 10 * time.Second

// New builds the application on st from cfg. Its metrics are registered on
// reg. It does not listen: call Fiber.Listener or Fiber.Test.
func New(cfg *config.Config, st Stores, log *slog.Logger, reg *prometheus.Registry) *App {
	a := &App{Auth: auth.New(st.DB, st.Redis, AuthConfig(cfg), log, reg)}
	a.view, a.near = inventory.NewStockView(cfg.NearCacheTTL, cfg.NearCacheSize), cfg.NearCacheTTL > 0
	a.Catalog, a.catalogCache = newCatalog(st, cfg, log, reg, inventory.CatalogOptions{View: a.view})
	purchases := purchaseRedis(cfg, st, log)
	a.Stock = NewStock(st, cfg)
	a.Rooms = room.New(st.DB, st.Redis, a.Stock, cfg.KeyPrefix, log, room.Options{})
	a.Sales = inventory.NewSalesWithRooms(st.DB, a.Stock, a.Rooms)
	a.Saga = newSaga(cfg)
	a.Orders = newOrders(st, cfg, a.Stock, a.Catalog, log, reg, purchases, a.Saga)
	a.Carts = cart.New(st.Redis, a.Catalog, a.Orders, cfg.KeyPrefix, log, reg)
	a.Locks = lock.New(st.Redis, cfg.KeyPrefix)
	a.Sweeper = NewSweeper(st, cfg, a.Stock, a.Locks, log, reg)
	drawOpts := draw.Options{Orders: a.Orders, CancelEvery: cfg.DrawCancelEvery()}
	if reg != nil { // a nil *Registry in the interface would not read as none
		drawOpts.Registry = reg
	}
	a.Draws = draw.New(st.DB, Authorizer(cfg), log, drawOpts)
	if cfg.PaymentProvider == "stripe" {
		a.Webhook = payment.NewWebhook(st.DB, cfg.StripeWebhookSecret, a.Orders, log, reg).ForEntries(a.Draws)
	}
	a.Audit = audit.New(st.DB, st.Redis, a.Stock, cfg.KeyPrefix, log)
	a.Audit.Rooms = a.Rooms
	a.auditEvery = cfg.AuditInterval
	a.Bestsellers = bestseller.New(st.Redis, st.DB, a.Catalog, a.Locks, cfg.KeyPrefix, log, reg)
	clientIP := server.ClientIP(cfg.TrustedProxies, cfg.RateLimitIPv6Prefix)
	a.Visits = visitor.New(st.Redis, visitor.Options{Prefix: cfg.KeyPrefix, Exists: a.Catalog.Exists,
		ClientIP: clientIP}, log, reg)
	a.Stores = pickup.New(st.DB, st.Redis, a.Locks, cfg.KeyPrefix, log)
	a.Live = live.New(st.Redis, a.Stock, live.Options{
		MaxStreams: cfg.LiveMaxStreams, MaxPerClient: cfg.LiveMaxStreamsPerIP, View: a.view}, log, reg)
	a.log = log
	if st.DB != nil && reg != nil {
		reg.MustRegister(newSaleCollector(a, st))
	}
	trips := newTrips(cfg, st, a.Auth, purchases, clientIP, log, reg)
	admin, user := a.Auth.RequireAdmin(), a.Auth.RequireUser()
	a.Fiber = server.New(server.Deps{
		Checks: trips.UpFront,
		// The routes that say they ride the one trip; the product reads'
		// count first, since it wraps the read.
		OneTrip: []func(fiber.Router){
			func(r fiber.Router) { a.Visits.CountRoutes(r, nil) },
			func(r fiber.Router) { a.Catalog.OneTripRoutes(r, trips.RidePublic, a.Auth.OptionalUser()) },
			func(r fiber.Router) { a.Rooms.OneTripRoutes(r, trips.Ride, user) },
			func(r fiber.Router) { orderhttp.OneTripRoutes(r, a.Orders, trips.Ride, user) },
			func(r fiber.Router) { a.Carts.OneTripRoutes(r, trips.Ride, user) },
		},
		Log:            log,
		Redis:          st.Redis,
		DB:             st.DB,
		Registry:       reg,
		BodyLimit:      cfg.BodyLimit,
		Upload:         inventory.IsImageUpload, // product images
		UploadLimit:    inventory.MaxImageBytes,
		TrustedProxies: cfg.TrustedProxies,
		IPv6Prefix:     cfg.RateLimitIPv6Prefix,
		Mount: []func(fiber.Router){
			a.Auth.Routes,
			func(r fiber.Router) { a.Visits.ReportRoutes(r, admin) },
			func(r fiber.Router) { a.Catalog.Routes(r, admin) },
			func(r fiber.Router) { a.Live.Routes(r, a.Catalog.Exists, clientIP) },
			a.Bestsellers.Routes,
			func(r fiber.Router) { a.Stores.Routes(r, admin) },
			func(r fiber.Router) { a.Sales.Routes(r, admin) },
			func(r fiber.Router) { a.Rooms.Routes(r, user, admin) },
			func(r fiber.Router) { a.Draws.Routes(r, user, admin) },
			func(r fiber.Router) { orderhttp.Routes(r, a.Orders, user) },
			func(r fiber.Router) { a.Carts.Routes(r, user) },
			func(r fiber.Router) { a.Audit.Routes(r, admin) },
			func(r fiber.Router) { r.Delete("/admin/users/:id", admin, a.erase) },
			func(r fiber.Router) { r.Get("/admin/users", admin, a.listUsers) },
			func(r fiber.Router) { orderhttp.AdminRoutes(r, a.Orders, admin) },
		},
		// The storefront page and the admin console, clients of the API
		// above, outside it, with the client code they share; the
		// storefront asks for a card when the provider takes cards.
		Top: []func(fiber.Router){
			func(r fiber.Router) { storefront.Routes(r, cfg.PaymentProvider) },
			adminpage.Routes,
			webpage.Routes,
		},
		Unlimited: a.webhookRoutes(),
	})
	return a
}

// webhookRoutes are the payment provider's: outside the per-IP limit,
// since every event comes from the provider's few addresses.
func (a *App) webhookRoutes() []func(fiber.Router) {
	if a.Webhook == nil {
		return nil
	}
	return []func(fiber.Router){a.Webhook.Routes}
}

// Start runs the application's background work: the pickup store index
// rebuilt from PostgreSQL (unless another instance is at it), the visitor
// counts' queue drained, the expiry sweeper (every instance runs one; the
// lock lets one work at a time), the waiting rooms' admitter (every
// instance runs one), the live stock subscription (which also
// keeps the product reads' stock view) and the near cache's subscription
// to catalog invalidations. The
// returned function stops it, writing what is queued, ends the live
// streams, and waits.
func (a *App) Start(ctx context.Context) (stop func()) {
	a.rebuildStoreIndex(ctx)
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); a.Rooms.Run(bctx) }()
	go func() { defer wg.Done(); a.Visits.Run(bctx) }()
	go func() { defer wg.Done(); _ = a.Sweeper.Run(bctx) }()
	go func() { defer wg.Done(); a.Live.Run(bctx) }()
	go func() { defer wg.Done(); a.catalogCache.Run(bctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); a.Draws.Loop(bctx, a.Locks, drawEvery) }()
	if a.auditEvery > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); a.Audit.Every(bctx, a.Locks, a.auditEvery) }()
	}
	return func() {
		a.StopStreams()
		cancel()
		wg.Wait()
	}
}

// drawEvery is how often the draw runner looks for draws due.
const drawEvery = time.Second

// streamsStopTimeout bounds how long StopStreams waits for the streams'
// last writes.
const streamsStopTimeout = 2 * time.Second

// StopStreams tells every live stream to reconnect and ends it. `shop
// serve` calls it before the HTTP server's graceful shutdown, which
// otherwise waits for streams that never end by themselves.
func (a *App) StopStreams() {
	ctx, cancel := context.WithTimeout(context.Background(), streamsStopTimeout)
	defer cancel()
	a.Rooms.Close()
	a.Live.Shutdown(ctx)
}

// rebuildStoreIndex: a failure is not fatal, since a search that finds the
// index missing rebuilds it.
func (a *App) rebuildStoreIndex(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, indexStartTimeout)
	defer cancel()
	switch err := a.Stores.RebuildIndex(ctx); {
	case errors.Is(err, lock.ErrBusy):
		a.log.Info("pickup store index: another instance is rebuilding it")
	case err != nil:
		a.log.Warn("pickup store index not rebuilt at start; the first search will", "err", err)
	}
}

// NewCatalog builds the catalog over its cache; reg may be nil (commands
// that expose no metrics).
// Its near cache (SHOP_NEAR_CACHE_TTL) stores nothing, since nothing runs
// its subscription: a command's reads go to Redis, and its writes still
// reach the serving instances' near caches.
func NewCatalog(st Stores, cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) *inventory.Catalog {
	c, _ := newCatalog(st, cfg, log, reg, inventory.CatalogOptions{})
	return c
}

func newCatalog(st Stores, cfg *config.Config, log *slog.Logger, reg prometheus.Registerer,
	o inventory.CatalogOptions) (*inventory.Catalog, *cache.Cache) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	c := cache.New(st.cache(), cache.Options{Prefix: cfg.KeyPrefix + "cache:", TTL: CatalogTTL, Jitter: 0.1,
		NearTTL: cfg.NearCacheTTL, NearSize: cfg.NearCacheSize}, reg)
	return inventory.NewCatalogOn(st.DB, NewStock(st, cfg), c, log, o), c
}

// NewStock is the live stock on st as cfg lays it out: its key prefix and
// the order partitions its SKUs fall in (on a cluster, their hash tags).
func NewStock(st Stores, cfg *config.Config) *inventory.Stock {
	return inventory.NewPartitionedStock(st.Redis, cfg.KeyPrefix, cfg.Partitions())
}

// NewOrders is the order service on st as cfg sets it up, for a command
// that changes orders outside `shop serve` (`shop user delete`).
func NewOrders(st Stores, cfg *config.Config, log *slog.Logger) *order.Service {
	return newOrders(st, cfg, NewStock(st, cfg), NewCatalog(st, cfg, log, nil), log, prometheus.NewRegistry(), nil, newSaga(cfg))
}

// newOrders: purchases, when not nil, is the purchase path's
// auto-pipeliner (purchaseRedis); placer, on a cluster, the saga.
func newOrders(st Stores, cfg *config.Config, stock *inventory.Stock, catalog *inventory.Catalog, log *slog.Logger,
	reg prometheus.Registerer, purchases redis.Scripter, placer *saga.Placer) *order.Service {
	return order.New(st.DB, st.Redis, stock, catalog.Exists, cfg.KeyPrefix, log, reg,
		order.Options{PaymentTTL: cfg.PaymentTTL, Payments: PaymentProvider(cfg),
			ReserveRedis: purchases, Placer: placerOf(placer),
			Restore: ledger.New(st.Redis, cfg.KeyPrefix, cfg.Partitions()).Restorer(st.DB)})
}

// newSaga is the placer of the orders on a Redis Cluster, whose lines lie
// in several shards; nil on a single Redis, where one script places one.
func newSaga(cfg *config.Config) *saga.Placer {
	if !cfg.Partitions().Grouped() {
		return nil
	}
	return saga.New(saga.Options{HoldLifetime: cfg.SagaHoldTTL})
}

func placerOf(p *saga.Placer) func(order.Kit) order.Placer {
	if p == nil {
		return nil
	}
	return p.On
}

// Placer is order.Options.Placer as cfg lays the stock out, for a
// command that places orders outside `shop serve` (`shop seed`).
func Placer(cfg *config.Config) func(order.Kit) order.Placer { return placerOf(newSaga(cfg)) }

// AuthConfig is the auth service's part of the configuration.
func AuthConfig(cfg *config.Config) auth.Config {
	return auth.Config{
		Secret:      []byte(cfg.JWTSecret),
		AccessTTL:   cfg.AccessTTL,
		SessionTTL:  cfg.SessionTTL,
		KeyPrefix:   cfg.KeyPrefix,
		FastHashing: cfg.PasswordHashing == "fast",
		// Off (0) leaves both zero.
		LoginFailures: cfg.LoginFailures.Limit,
		LoginWindow:   cfg.LoginFailures.Window,
	}
}
