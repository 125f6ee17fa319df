package order

import (
	"context"
	"errors"
	"fmt"
)

// Gate runs the checks a request must pass before it changes anything and,
// when they pass, the reserve script with keys and args, in one script
// call: the shop's are the rate limiter's window and the session check,
// so a purchase pays one round trip to Redis instead of two (the
// composition and its reasons are in internal/shop/onetrip.go).
//
// ran is false when the gate cannot run the reservation (its checks have
// already run): the service then runs the reserve script alone. When it
// ran, reply is the reserve script's reply; or err is the checks' refusal
// (made with Refusal: the buyer is answered with it; nothing was
// reserved); or a Redis error, after which, as for the script alone, a retry with the same
// Idempotency-Key tells what happened.
type Gate func(ctx context.Context, keys []string, args []any) (reply any, ran bool, err error)

// WithGate makes the service ask gate for each reservation's Gate (nil:
// none, the script runs alone), given the request's context.
func WithGate(gate func(context.Context) Gate) Option {
	return func(s *Service) { s.gate = gate }
}

// ReserveLua is the reserve script's text, for a Gate to run it inside its
// own script. Its KEYS and ARGV are those reserve passes (reserve.lua).
func ReserveLua() string { return reserveLua }

// runReserve runs the reserve script with keys and args: through the
// request's gate when it has one that can, else alone.
func (s *Service) runReserve(ctx context.Context, keys []string, args []any) ([]string, error) {
	if s.gate != nil {
		if g := s.gate(ctx); g != nil {
			reply, ran, err := g(ctx, keys, args)
			if ran {
				if err != nil {
					return nil, err
				}
				return replyStrings(reply)
			}
		}
	}
	return reserveScript.Run(ctx, s.reserveRdb, keys, args...).StringSlice()
}

// Refusal marks err as a Gate's refusal of the request: the buyer is
// answered with err, and it is no outcome of a placement (the purchase
// metrics do not count it).
func Refusal(err error) error { return &refused{err} }

type refused struct{ err error }

func (r *refused) Error() string { return r.err.Error() }
func (r *refused) Unwrap() error { return r.err }

// gateRefusal returns the answer a gate refused the placement with.
func gateRefusal(err error) (error, bool) {
	var r *refused
	if errors.As(err, &r) {
		return r.err, true
	}
	return nil, false
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
