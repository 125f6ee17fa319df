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
	// Defer names the requests whose check waits for their route, which
	// runs it in the same script call as its own first Redis step (the
	// Deferral's Script; see Deferred): the first Deferral whose Match
	// accepts a request takes it. It takes effect only with a companion
	// that can ride and serve deferred checks (Companion.Deferred,
	// Verdict).
	Defer []Deferral
}

// Middleware limits every request it sees. It sets X-RateLimit-Limit and
// X-RateLimit-Remaining on every answer, unless the limiter is off: then
// it only serves the deferred checks, and the other requests pass as if
// it were not there.
func (l *Limiter) Middleware(o Options) fiber.Handler {
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	withC := l.companionFor(o.Companion)
	deferrals := l.deferringFor(&o, withC)
	return func(c *fiber.Ctx) error {
		if g := deferralOf(deferrals, c); g != nil {
			return g.serve(c, &o)
		}
		if l.Off() {
			return c.Next()
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), o.Timeout)
		res, err := l.check(ctx, c, o.Key(c), withC)
		cancel()
		if pass, answer := o.decide(c, res, err); !pass {
			return answer
		}
		return c.Next()
	}
}

// decide turns a check's outcome into the middleware's answer: pass, or
// the answer to give instead of the route's. It sets the X-RateLimit
// headers and Retry-After.
func (o *Options) decide(c *fiber.Ctx, res Result, err error) (pass bool, answer error) {
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
	return w.run(ctx, c, client, keys, args)
}

// run is allow, handing the companion's reply to Done when it ran.
func (w *withCompanion) run(ctx context.Context, c *fiber.Ctx, client string, keys []string, args []any) (Result, error) {
	res, reply, ran, err := w.allow(ctx, client, keys, args)
	if ran {
		w.c.Done(c, reply)
	}
	return res, err
}
