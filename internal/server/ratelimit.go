package server

import (
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/ratelimit"
)

// limiterMiddleware puts the per-IP limiter in front of /api/v1 with the
// shop's problem documents and metrics, the companion (if any) riding in
// its round trip, and the deferred routes (if any).
func limiterMiddleware(d Deps, who clients) fiber.Handler {
	l, log, reg := d.Limiter, d.Log, d.Registry
	if l.Off() {
		return offMiddleware(d, who)
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shop_ratelimit_decisions_total",
		Help: "Rate-limit decisions: allowed, limited, or error (Redis did not answer).",
	}, []string{"decision"})
	reg.MustRegister(decisions)
	limited := decisions.WithLabelValues("limited")
	errored := decisions.WithLabelValues("error")
	mw := l.Middleware(ratelimit.Options{
		Companion: d.LimiterCompanion,
		Defer:     d.LimiterDefer,
		Key:       who.key,
		Limited: func(c *fiber.Ctx, retryAfter int) error {
			limited.Inc()
			return rateLimited(c, retryAfter)
		},
		Unavailable: func(*fiber.Ctx, error) error {
			return apperr.Unavailable("rate limiter unavailable")
		},
		OnError: func(err error) {
			errored.Inc()
			log.Warn("rate limiter", "err", err)
		},
	})
	return mw
}

// rateLimited is the answer to a client over its limit.
func rateLimited(_ *fiber.Ctx, retryAfter int) error {
	return &apperr.Error{Code: apperr.CodeRateLimited, Detail: "too many requests from this address", RetryAfter: retryAfter}
}

// offDeadline is the deferred routes' one trip with the limit off: the
// deadline each of its parts had alone (the session check's, the
// reservation's), not the limiter's second.
const offDeadline = 2 * time.Second

// offMiddleware is the limiter with the limit off: it decides nothing, so
// it counts no decision and logs no limiter error; it only carries the
// deferred routes' session check into their step's script call, and a
// Redis error there is the session store's.
func offMiddleware(d Deps, who clients) fiber.Handler {
	return d.Limiter.Middleware(ratelimit.Options{
		Companion: d.LimiterCompanion,
		Defer:     d.LimiterDefer,
		Key:       who.key,
		Timeout:   offDeadline,
		Limited:   rateLimited, // never called: a limit of 0 allows all
		Unavailable: func(*fiber.Ctx, error) error {
			return apperr.Unavailable("the session store is unreachable; retry shortly")
		},
	})
}
