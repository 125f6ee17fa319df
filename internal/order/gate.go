package order

import (
	"context"
	"errors"
	"fmt"
)

// Gate runs the checks a request must pass before it changes anything and,
// when they pass, the reserve script, in one script call: the shop's are
// the rate limiter's window and the session check, so a purchase pays one
// round trip to Redis instead of two (the composition and its reasons are
// in internal/shop/onetrip.go).
type Gate interface {
	// Reserve runs the checks and then the reserve script with keys and
	// args. ran is false when the gate cannot (its checks have already
	// run): the service then runs the script alone. When it ran, reply is
	// the script's reply; or err is the checks' refusal (made with
	// Refusal: the buyer is answered with it; nothing was reserved); or a
	// Redis error, after which, as for the script alone, a retry with the
	// same Idempotency-Key tells what happened.
	Reserve(ctx context.Context, keys []string, args []any) (reply any, ran bool, err error)
	// Settle runs the checks alone unless they have run, for a placement
	// answered without a reservation (a checkout's replay), and returns
	// their refusal (made with Refusal) or nil.
	Settle(ctx context.Context) error
}

// WithGate makes the service ask gate for each reservation's Gate (nil:
// none, the script runs alone), given the request's context.
func WithGate(gate func(context.Context) Gate) Option {
	return func(s *Service) { s.gate = gate }
}

// ReserveLua is the reserve script's text, for a Gate to run it inside its
// own script. Its KEYS and ARGV are those reserve passes (reserve.lua).
func ReserveLua() string { return reserveLua }

// gateOf is the request's gate, or nil.
func (s *Service) gateOf(ctx context.Context) Gate {
	if s.gate == nil {
		return nil
	}
	return s.gate(ctx)
}

// settleGate runs the request's checks, when it has a gate, before an
// answer that reserves nothing; it returns their refusal or nil.
func (s *Service) settleGate(ctx context.Context) error {
	if g := s.gateOf(ctx); g != nil {
		return g.Settle(ctx)
	}
	return nil
}

// runReserve runs the reserve script with keys and args: through the
// request's gate when it has one that can, else alone.
func (s *Service) runReserve(ctx context.Context, keys []string, args []any) ([]string, error) {
	if g := s.gateOf(ctx); g != nil {
		reply, ran, err := g.Reserve(ctx, keys, args)
		if ran {
			if err != nil {
				return nil, err
			}
			return replyStrings(reply)
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
