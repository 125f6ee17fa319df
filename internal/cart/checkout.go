package cart

import (
	"context"
	"errors"
	"fmt"

	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/order"
)

// checkoutAttempts bounds the re-reads when the shopper keeps changing the
// cart during checkout: a few are plenty for a human; more would only let
// a script spinning on the cart hold the request.
const checkoutAttempts = 3

// Checkout reserves every line of user's cart and enqueues one order, all
// or nothing, emptying the cart in the same atomic step. A repeat with the
// same idemKey returns the first answer, Replayed. checks (onetrip.Of;
// nil: none) run first, in the reservation's call. passes are the buyer's
// waiting room passes: a line of a round with a room needs its own.
//
// Errors: the checks' refusal; ErrCartEmpty; order.ErrOutOfStock,
// ErrLimitExceeded, ErrPassRequired or ErrSaleNotActive naming the SKUs;
// ErrCartBusy; a 503.
func (s *Service) Checkout(ctx context.Context, user, idemKey string, checks *onetrip.Checks, passes ...string) (order.Placed, error) {
	p, err := s.checkout(ctx, user, idemKey, checks, passes)
	s.metrics.checkout(p, err)
	return p, err
}

func (s *Service) checkout(ctx context.Context, user, idemKey string, checks *onetrip.Checks, passes []string) (order.Placed, error) {
	for range checkoutAttempts {
		lines, err := s.lines(ctx, user)
		if err != nil {
			return order.Placed{}, err
		}
		if len(lines) == 0 {
			return s.checkoutEmpty(ctx, user, idemKey, checks)
		}
		if s.beforePlace != nil {
			s.beforePlace()
		}
		p, err := s.orders.Place(ctx, user, lines, order.PlaceOptions{IdemKey: idemKey, CartKey: s.key(user), Checks: checks, Passes: passes})
		if !errors.Is(err, order.ErrCartChanged) {
			return p, wrap("checkout", err)
		}
	}
	return order.Placed{}, fmt.Errorf("checkout: %w", ErrCartBusy)
}

// checkoutEmpty answers a checkout of an empty cart: the first answer when
// an earlier checkout with the same Idempotency-Key (which emptied it) was
// accepted, else ErrCartEmpty.
func (s *Service) checkoutEmpty(ctx context.Context, user, idemKey string, checks *onetrip.Checks) (order.Placed, error) {
	if idemKey == "" {
		return order.Placed{}, ErrCartEmpty
	}
	p, ok, err := s.orders.Replay(ctx, user, idemKey, checks)
	switch {
	case err != nil:
		return order.Placed{}, fmt.Errorf("checkout: %w", err)
	case !ok:
		return order.Placed{}, ErrCartEmpty
	}
	return p, nil
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
