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
}

// Middleware limits every request it sees (the window alone) and sets
// X-RateLimit-Limit and X-RateLimit-Remaining on every answer. With the
// limiter off requests pass as if it were not there.
func (l *Limiter) Middleware(o Options) fiber.Handler {
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	return func(c *fiber.Ctx) error {
		if l.Off() {
			return c.Next()
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), o.Timeout)
		res, err := l.Allow(ctx, o.Key(c))
		cancel()
		if pass, answer := o.Decide(c, res, err); !pass {
			return answer
		}
		return c.Next()
	}
}

// Decide turns a check's outcome into the middleware's answer: pass, or
// the answer to give instead of the route's. It sets the X-RateLimit
// headers and Retry-After. A Redis error fails open for GET and HEAD.
func (o *Options) Decide(c *fiber.Ctx, res Result, err error) (pass bool, answer error) {
	if err != nil {
		if o.OnError != nil {
			o.OnError(err)
		}
		if c.Method() == fiber.MethodGet || c.Method() == fiber.MethodHead {
			return true, nil // fail open: reads stand or fall on their own
		}
		return false, o.Unavailable(c, err)
	}
	if res.Limit > 0 { // 0: the limiter is off, and says nothing
		c.Set("X-RateLimit-Limit", strconv.Itoa(res.Limit))
		c.Set("X-RateLimit-Remaining", strconv.Itoa(res.Remaining))
	}
	if !res.Allowed {
		secs := res.RetryAfterSeconds()
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		return false, o.Limited(c, secs)
	}
	return true, nil
}
