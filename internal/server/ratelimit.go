package server

import (
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
		Limited: func(_ *fiber.Ctx, retryAfter int) error {
			limited.Inc()
			return &apperr.Error{Code: apperr.CodeRateLimited, Detail: "too many requests from this address", RetryAfter: retryAfter}
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
