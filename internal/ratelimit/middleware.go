package ratelimit

import (
	"context"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Options configure the middleware.
type Options struct {
	// Key names the client of a request (its IP).
	Key func(*fiber.Ctx) string
	// Limited is returned when the client is over its limit; retryAfter is
	// in whole seconds (at least 1) and already set as Retry-After.
	Limited func(c *fiber.Ctx, retryAfter int) error
	// Unavailable is returned when Redis does not answer and the request
	// changes state.
	Unavailable func(c *fiber.Ctx, err error) error
	// OnError is told about Redis errors (for logs and metrics).
	OnError func(err error)
	// Timeout bounds the Redis call, so an outage never hangs a request.
	Timeout time.Duration
	// Companion, when set, rides in the limiter's round trip (see Companion).
	Companion *Companion
}

// Middleware limits every request it sees. It sets X-RateLimit-Limit and
// X-RateLimit-Remaining on every answer.
func (l *Limiter) Middleware(o Options) fiber.Handler {
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	withC := l.companionFor(o.Companion)
	return func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), o.Timeout)
		res, err := l.check(ctx, c, o.Key(c), withC)
		cancel()
		if err != nil {
			if o.OnError != nil {
				o.OnError(err)
			}
			if c.Method() == fiber.MethodGet || c.Method() == fiber.MethodHead {
				return c.Next() // fail open: reads stand or fall on their own
			}
			return o.Unavailable(c, err)
		}
		c.Set("X-RateLimit-Limit", strconv.Itoa(res.Limit))
		c.Set("X-RateLimit-Remaining", strconv.Itoa(res.Remaining))
		if !res.Allowed {
			secs := res.RetryAfterSeconds()
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
			return o.Limited(c, secs)
		}
		return c.Next()
	}
}

// check runs the window for client, with the companion when it can ride
// and has something to run for c.
func (l *Limiter) check(ctx context.Context, c *fiber.Ctx, client string, w *withCompanion) (Result, error) {
	if w == nil {
		return l.Allow(ctx, client)
	}
	keys, args, ok := w.c.Prepare(c)
	if !ok {
		return l.Allow(ctx, client)
	}
	res, reply, ran, err := w.allow(ctx, client, keys, args)
	if ran {
		w.c.Done(c, reply)
	}
	return res, err
}
