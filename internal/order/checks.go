package order

import (
	"context"
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/ratelimit"
)

// OneTrip names the limiter's deferral whose script runs a purchase's
// checks and then its reservation (internal/onetrip's Purchase).
const OneTrip = "purchase"

// ChecksOf returns c's rate-limit window and session check when the
// limiter deferred them to run in the same script call as its
// reservation, or nil when they ran up front.
func ChecksOf(c *fiber.Ctx) *ratelimit.Deferred { return ratelimit.DeferredOf(c, OneTrip) }

// ReserveLua is the reserve script's text, for internal/onetrip to run
// after the checks. Its KEYS and ARGV are those reserve passes.
func ReserveLua() string { return reserveLua }

// runReserve runs the reserve script with keys and args: after checks in
// the same call when they have not run, else alone.
func (s *Service) runReserve(ctx context.Context, checks *ratelimit.Deferred, keys []string, args []any) ([]string, error) {
	if checks != nil {
		reply, ran, err := checks.Run(ctx, keys, args)
		if ran {
			if err != nil {
				return nil, err
			}
			return replyStrings(reply)
		}
	}
	return reserveScript.Run(ctx, s.reserveRdb, keys, args...).StringSlice()
}

// checksRefusal is the checks' refusal when err is it: the buyer's answer, and
// no outcome of a placement (the purchase metrics do not count it).
func checksRefusal(checks *ratelimit.Deferred, err error) error {
	if checks == nil || err == nil {
		return nil
	}
	if r := checks.Refusal(); r != nil && errors.Is(err, r) {
		return r
	}
	return nil
}

// replyStrings reads a script reply of strings, as StringSlice does.
func replyStrings(reply any) ([]string, error) {
	vals, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("reserve: script answered %v", reply)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		if out[i], ok = v.(string); !ok {
			return nil, fmt.Errorf("reserve: script answered %v", reply)
		}
	}
	return out, nil
}
