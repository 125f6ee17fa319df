// Package server assembles the shop's Fiber app: the middleware order, the
// operational routes (/healthz, /readyz, /metrics, /openapi.yaml), the
// domain routes under /api/v1, and problem+json errors for everything;
// and Listener, whose connections close without resetting a client that is
// still sending (so it reads its 413).
//
// The reasoning behind it is in docs/design/server.md.
package server

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/telemetry"
)

// Timeouts for client connections: a slow client cannot hold a connection
// (and its buffers) for longer than these.
const (
	readTimeout  = 10 * time.Second
	writeTimeout = 10 * time.Second
	idleTimeout  = 60 * time.Second
)

// Deps is what the app is built from.
type Deps struct {
	Log      *slog.Logger
	Redis    redis.UniversalClient
	DB       *pgxpool.Pool
	Registry *prometheus.Registry
	// BodyLimit is the largest request body in bytes (413 above it).
	BodyLimit int
	// Upload names the requests whose body may be up to UploadLimit
	// instead (an admin's image); nil: none.
	Upload      func(method, path string) bool
	UploadLimit int
	// TrustedProxies may set the client IP through X-Forwarded-For.
	TrustedProxies []string
	// IPv6Prefix is the prefix length of the IPv6 addresses that share one
	// limiter window (default 64).
	IPv6Prefix int
	// Limiter, when set and Checks is not, limits every /api/v1 request
	// per client IP (its window alone).
	Limiter *ratelimit.Limiter
	// Checks, when set, runs every /api/v1 request's checks (the shop's:
	// the limiter's window with the session check, internal/onetrip)
	// before its route, except the routes OneTrip mounts.
	Checks fiber.Handler
	// OneTrip registers /api/v1 routes whose own route-level middleware
	// runs their checks (internal/onetrip's Ride), mounted before Checks:
	// Fiber runs handlers in the order they were registered, and these
	// answer without calling on.
	OneTrip []func(fiber.Router)
	// Mount registers the domain routes on the /api/v1 router.
	Mount []func(fiber.Router)
	// Unlimited registers /api/v1 routes the per-IP limiter does not
	// count (a payment provider's webhook).
	Unlimited []func(fiber.Router)
	// Top registers routes outside /api/v1 (a web page), after the
	// operational ones: neither rate limited nor part of the API.
	Top []func(fiber.Router)
}

// New builds the app. It does not listen; call Listen or Test on it.
func New(d Deps) *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:                 "shop",
		ErrorHandler:            ErrorHandler(d.Log),
		BodyLimit:               fiberBodyLimit(d),
		ReadTimeout:             readTimeout,
		WriteTimeout:            writeTimeout,
		IdleTimeout:             idleTimeout,
		DisableStartupMessage:   true,
		ProxyHeader:             fiber.HeaderXForwardedFor,
		EnableTrustedProxyCheck: true,
		TrustedProxies:          d.TrustedProxies,
		EnableIPValidation:      true,
	})
	who := newClients(d.TrustedProxies, d.IPv6Prefix)
	httpm := newHTTPMetrics(d.Registry)
	registerPoolMetrics(d.Registry, d.DB, d.Redis)

	if telemetry.Active() {
		// First, so the server span covers the whole request; it honours
		// an incoming traceparent (the global W3C propagator).
		app.Use(serverSpan())
	}
	app.Use(RequestID())
	app.Use(observe(d.Log, httpm, who, app.ErrorHandler))
	app.Use(recover.New())
	if fiberBodyLimit(d) > d.BodyLimit {
		app.Use(bodyLimit(d))
	}

	app.Get("/healthz", healthz)
	app.Get("/readyz", readyz(d.Redis, d.DB))
	app.Get("/metrics", metricsHandler(d.Registry))
	app.Get("/openapi.yaml", openapiHandler)

	for _, mount := range d.Top {
		mount(app)
	}

	v1 := app.Group("/api/v1")
	// Before the limiter: Fiber runs handlers in the order they were
	// registered, and these answer without calling on.
	for _, mount := range d.Unlimited {
		mount(v1)
	}
	for _, mount := range d.OneTrip {
		mount(v1)
	}
	switch {
	case d.Checks != nil:
		v1.Use(d.Checks)
	case d.Limiter != nil:
		v1.Use(limiterMiddleware(d, who))
	}
	for _, mount := range d.Mount {
		mount(v1)
	}
	return app
}
