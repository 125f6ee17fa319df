package server

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/metric"
	"github.com/shop-oss/shop/internal/ratelimit"
)

// limiterMiddleware puts the per-IP limiter alone in front of /api/v1
// with the shop's problem documents and metrics.
func limiterMiddleware(d Deps, who clients) fiber.Handler {
	return d.Limiter.Middleware(LimiterOptions(d.Registry, d.Log, who.key, d.Limiter.Off()))
}

// LimiterOptions are the per-IP limiter's answers as the shop gives them,
// for key's clients: 429 rate_limited, 503 when Redis does not answer,
// decisions counted on reg and errors logged. With the limiter off it
// decides nothing, so it counts no decision and logs no limiter error;
// whatever still runs (a session check riding with a route's step) fails
// as the session store's, within that step's own deadline.
func LimiterOptions(reg prometheus.Registerer, log *slog.Logger, key func(*fiber.Ctx) string, off bool) ratelimit.Options {
	if off {
		return ratelimit.Options{
			Key:     key,
			Timeout: offDeadline,
			Limited: rateLimited, // never called: a limit of 0 allows all
			Unavailable: func(*fiber.Ctx, error) error {
				return apperr.Unavailable("the session store is unreachable; retry shortly")
			},
		}
	}
	decisions := metric.CounterVec("shop_ratelimit_decisions_total",
		"Rate-limit decisions: allowed, limited, or error (Redis did not answer).", "decision")
	reg.MustRegister(decisions)
	limited := decisions.WithLabelValues("limited")
	errored := decisions.WithLabelValues("error")
	return ratelimit.Options{
		Key:     key,
		Timeout: time.Second,
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
	}
}

// rateLimited is the answer to a client over its limit.
func rateLimited(_ *fiber.Ctx, retryAfter int) error {
	return &apperr.Error{Code: apperr.CodeRateLimited, Detail: "too many requests from this address", RetryAfter: retryAfter}
}

// offDeadline bounds the checks' call with the limit off: the deadline
// each part of a one-trip call had alone (the session check's, the
// reservation's), not the limiter's second.
const offDeadline = 2 * time.Second
