package order

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/telemetry"
)

var (
	//go:embed pay.lua
	payLua    string
	payScript = redis.NewScript(payLua)
)

// Pay charges the order's total through the payment provider and marks it
// paid, unless its payment window closed first: exactly one of a payment
// and an expiry (or a cancellation) racing it wins, and the loser's money
// is refunded. Paying a paid order answers the same and charges nothing.
// A payment the provider has not finished (it needs the shopper, or is
// slow) leaves the order confirmed, its Payment saying why: the
// provider's report finishes it (PaymentSucceeded).
//
// Errors: ErrNotFound, ErrOrderPending (not persisted yet: retry),
// ErrNotPayable (cancelled, expired or rejected), ErrDeclined, or a 503
// (Redis or the provider did not answer; paying again with the same token
// charges at most once).
func (s *Service) Pay(ctx context.Context, user, id, token string) (Order, error) {
	o, err := s.payable(ctx, user, id)
	if err != nil {
		return Order{}, err
	}
	if o.Status == StatusPaid {
		return s.withPayment(ctx, o), nil
	}
	p, err := s.payments.Charge(ctx, Charge{Key: chargeKey(o.ID, token), OrderID: o.ID,
		AmountCents: o.TotalCents, Token: token})
	switch {
	case errors.Is(err, ErrPaymentDeclined):
		s.metrics.pay("declined")
		return Order{}, ErrDeclined
	case err != nil:
		s.log.Warn("payment provider", "order", o.ID, "err", err)
		return Order{}, fmt.Errorf("charge order %s: %w: %w", o.ID, apperr.Unavailable("the payment provider is unavailable"), err)
	}
	if p.Settled() {
		p.ClientSecret = "" // the shopper has nothing to finish
	}
	// Recorded before the order moves: the money is the provider's fact
	// whatever the order's fate. Without PostgreSQL the payment goes on
	// (Redis decides the order) and the webhook or reconcile records it.
	if err := s.savePayment(ctx, o.ID, p); err != nil {
		s.log.Warn("record payment", "order", o.ID, "payment", p.ID, "err", err)
	}
	if p.Status != PaymentSucceeded {
		s.metrics.pay("incomplete")
		o.Payment = &p
		return o, nil
	}
	return s.markPaid(ctx, o, p)
}

// payable returns the order if a payment may go ahead (or it is paid
// already), else the refusal. An order whose window closed is expired on
// the spot rather than waiting for the sweeper.
func (s *Service) payable(ctx context.Context, user, id string) (Order, error) {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	o, live, err := s.liveOrder(ctx, user, id)
	if err != nil {
		return Order{}, err
	}
	switch {
	case o.Status == StatusPaid:
		return o, nil
	case !live:
		return Order{}, ErrNotPayable
	case o.Status == StatusPending:
		return Order{}, ErrOrderPending
	case o.Status == StatusConfirmed && o.ExpiresAt != nil && !time.Now().Before(*o.ExpiresAt):
		return s.expireNow(ctx, o)
	case o.Status == StatusConfirmed:
		return o, nil
	}
	return Order{}, ErrNotPayable
}

// markPaid runs the pay script after payment p succeeded (Pay's path).
// When p lost (the order expired, was cancelled, or was paid with another
// payment) it is refunded; a refund that fails is logged for a person and
// `shop payments reconcile` finds the payment again: the order's fate is
// decided either way.
func (s *Service) markPaid(ctx context.Context, o Order, p Payment) (Order, error) {
	o, won, err := s.payStep(ctx, o, p)
	if won == payLost {
		if rerr := s.refund(ctx, o.ID, p); rerr != nil {
			s.log.Error("refund failed: refund it by hand", "order", o.ID, "payment_ref", p.ID, "err", rerr)
		}
	}
	return o, err
}

// What the pay script made of a payment.
type payWin int

const (
	payUndecided  payWin = iota // the script did not answer: unknown
	payPaidNow                  // this call paid the order with it
	payPaidBefore               // the order was paid with it already
	payLost                     // it cannot pay the order: refund it
)

// payStep runs the pay script for payment p of o, and says what became of
// p. An expiry it finds due is carried out on the spot (expireNow).
func (s *Service) payStep(ctx context.Context, o Order, p Payment) (Order, payWin, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lifecycleTimeout)
	defer cancel()
	reply, err := payScript.Run(ctx, s.rdb, []string{s.keys.Status(o.ID), s.keys.Due(o.partition), s.keys.Stream(o.partition)},
		o.ID, p.ID, telemetry.Traceparent(ctx)).StringSlice()
	if err != nil {
		// Unknown outcome: keep the charge; a retry with the same token
		// reuses it (same key) and learns the state.
		return Order{}, payUndecided, s.unavailable("mark order paid", err)
	}
	switch {
	case reply[0] == "ok" && len(reply) == 2:
		t := MillisTime(reply[1])
		o.Status, o.PaidAt, o.paymentRef, o.Payment = StatusPaid, &t, p.ID, &p
		s.metrics.transition(StatusPaid, 0)
		s.metrics.pay("paid")
		return o, payPaidNow, nil
	case reply[0] == "state" && len(reply) == 3 && reply[1] == StatusPaid:
		// Paid already: with p (the same key: a retry, or its report),
		// else by another payment, and p is a second charge.
		won := payPaidBefore
		if reply[2] != p.ID {
			won = payLost
		}
		o, err := s.paidNow(ctx, o)
		return o, won, err
	case reply[0] == "late":
		o, err := s.expireNow(ctx, o)
		return o, payLost, err
	}
	s.metrics.pay("not_payable")
	return Order{}, payLost, ErrNotPayable
}

// paidNow reads back an order another call paid.
func (s *Service) paidNow(ctx context.Context, o Order) (Order, error) {
	now, found, err := s.life.read(ctx, o.ID)
	if err != nil || !found {
		o.Status = StatusPaid
		return o, nil //nolint:nilerr // paid it is; only paid_at is missing
	}
	return s.withPayment(ctx, now), nil
}

// expireNow expires an order whose window closed (the sweeper would, a
// moment later) and answers the payment: refused, unless another payment
// made it in time.
func (s *Service) expireNow(ctx context.Context, o Order) (Order, error) {
	r, err := s.life.giveBack(ctx, o, StatusExpired)
	switch {
	case err != nil:
		return Order{}, s.unavailable("expire order", err)
	case r.Refused && r.State == StatusPaid:
		return s.paidNow(ctx, o)
	case !r.Refused:
		s.metrics.transition(StatusExpired, r.Units)
	}
	s.metrics.pay("not_payable")
	return Order{}, ErrNotPayable
}

// refund gives payment p of order id back in full, once however often it
// is asked (the provider's refund is keyed by p), and records it.
func (s *Service) refund(ctx context.Context, id string, p Payment) error {
	if err := s.payments.Refund(ctx, p.ID); err != nil {
		return err
	}
	s.metrics.pay("refunded")
	p.Status, p.ClientSecret = PaymentRefunded, ""
	if err := s.savePayment(ctx, id, p); err != nil {
		return err
	}
	return s.recordRefunded(ctx, p.ID, p.AmountCents)
}

// chargeKey is the provider's idempotency key of paying order id with
// token: a retry of the same payment reuses the charge; another card (a
// new token after a decline) is another charge.
func chargeKey(id, token string) string {
	sum := sha256.Sum256([]byte(token))
	return "order:" + id + ":" + hex.EncodeToString(sum[:8])
}
