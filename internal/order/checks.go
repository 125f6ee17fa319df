package order

import (
	"context"
	"errors"
	"fmt"

	"github.com/shop-oss/shop/internal/onetrip"
)

// reserveTrip is a purchase's or a checkout's one trip: the request's
// checks, then reserve.lua.
var reserveTrip = onetrip.NewStep(reserveLua)

// ReserveLua is the reserve script's text, as it runs alone.
func ReserveLua() string { return reserveLua }

// runReserve runs the reserve script with keys and args: after checks in
// the same call when they have not run, else alone.
func (s *Service) runReserve(ctx context.Context, checks *onetrip.Checks, keys []string, args []any) ([]string, error) {
	reply, ran, err := checks.Run(ctx, reserveTrip, keys, args)
	if !ran {
		return reserveScript.Run(ctx, s.reserveRdb, keys, args...).StringSlice()
	}
	if err != nil {
		return nil, err
	}
	return replyStrings(reply)
}

// checksRefusal is the checks' refusal when err is it: the buyer's answer, and
// no outcome of a placement (the purchase metrics do not count it).
func checksRefusal(checks *onetrip.Checks, err error) error {
	if r := checks.Refusal(); r != nil && err != nil && errors.Is(err, r) {
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
