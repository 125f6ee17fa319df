package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shop-oss/shop/internal/apperr"
)

// ErrNotRefundable: only a paid order can be refunded.
var ErrNotRefundable = apperr.NewError(apperr.CodeNotRefundable, "only a paid order can be refunded")

const (
	// refundTimeout bounds a refund, the provider's call included.
	refundTimeout = 15 * time.Second
	// refundClaimTTL outlives any one call of the provider (refundTimeout),
	// so two calls of a refund never ask the provider at once, and a call
	// that died leaves the claim to the next one soon after.
	refundClaimTTL = 2 * refundTimeout
)

// Refund pays order id back in full through its payment provider and
// gives its units back, for an admin (whoever's order it is). The order
// moves from paid to refunded in the release step a cancel takes
// (giveBack, guarded by the status), so its units go back exactly once,
// and only then is the money asked back: a refunded order that is never
// paid back is repaired by the next call (or by reconcile, which refunds
// a succeeded payment of an order that is not paid), while a payment
// given back for an order that stays paid could not be. Refunding a
// refunded order answers the same and refunds nothing more.
//
// Errors: ErrNotFound (also for a malformed id), ErrNotRefundable (not
// paid), or a 503 (Redis, PostgreSQL or the provider did not answer; the
// same call again finishes it).
func (s *Service) Refund(ctx context.Context, id string) (Order, error) {
	ctx, cancel := context.WithTimeout(ctx, refundTimeout)
	defer cancel()
	o, err := s.refundable(ctx, id)
	if err == nil && o.Status == StatusPaid {
		o, err = s.takeBack(ctx, o)
	}
	if err != nil {
		return Order{}, err
	}
	return s.payBack(ctx, o)
}

// refundable returns order id, paid or refunded already, with its live
// status; else the refusal.
func (s *Service) refundable(ctx context.Context, id string) (Order, error) {
	user, err := s.buyerOf(ctx, id)
	if err != nil {
		return Order{}, err
	}
	o, live, err := s.liveOrder(ctx, user, id)
	switch {
	case err != nil:
		return Order{}, err
	case o.Status != StatusPaid && o.Status != StatusRefunded:
		return Order{}, ErrNotRefundable
	case !live && o.Status == StatusPaid:
		return s.revive(ctx, o, user)
	}
	return o, nil
}

// buyerOf returns the user whose order id is (ErrNotFound: no such order).
func (s *Service) buyerOf(ctx context.Context, id string) (string, error) {
	oid, ok := parseID(id)
	if !ok {
		return "", ErrNotFound
	}
	o, found, err := s.liveStatus(ctx, oid.String())
	if err != nil || found {
		return o.userID, s.wrapUnavailable("order status", err)
	}
	var user string
	err = s.db.QueryRow(ctx, `SELECT user_id::text FROM orders WHERE id = $1`, oid).Scan(&user)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return user, s.wrapUnavailable("find order", err)
}

// revive gives a paid order whose Redis status is gone (a week after it
// was placed) its status back from PostgreSQL (Options.Restore), so that
// its refund takes the same guarded step as any other.
func (s *Service) revive(ctx context.Context, o Order, user string) (Order, error) {
	if s.restore == nil {
		return Order{}, errNotRevived
	}
	err := s.restore(ctx, o.ID)
	if err == nil && o.PaidAt != nil {
		// What the restore leaves out, which a paid status carries.
		err = s.rdb.HSet(ctx, s.keys.Status(o.ID), "paid_ms", o.PaidAt.UnixMilli(), "payment_ref", o.paymentRef).Err()
	}
	now, live, rerr := s.liveOrder(ctx, user, o.ID)
	if err = errors.Join(err, rerr); err != nil || !live {
		// PostgreSQL or Redis failed us between two reads that worked.
		return Order{}, fmt.Errorf("revive order %s: %w: %w", o.ID, errNotRevived, err)
	}
	return now, nil
}

// errNotRevived: a forgotten order's status could not be restored.
var errNotRevived = apperr.Unavailable("the order's status could not be restored; refund again")

// takeBack moves paid o to refunded and gives its units back, once.
func (s *Service) takeBack(ctx context.Context, o Order) (Order, error) {
	r, err := s.life.giveBack(ctx, o, StatusRefunded)
	switch {
	case err != nil:
		return Order{}, s.unavailable("refund order", err)
	case r.Refused && r.State != StatusRefunded:
		return Order{}, ErrNotRefundable
	case !r.Refused:
		s.metrics.transition(StatusRefunded, r.Units)
		s.log.Info("order refunded", "order", o.ID, "units_back", r.Units)
	}
	o.Status = StatusRefunded
	return o, nil
}

// payBack refunds refunded order o's payment unless its record says it
// was. One call at a time asks the provider (the claim); another one
// meanwhile answers the order as it stands, its money on its way back.
// The provider's refund is keyed by the payment, so even a claim that
// lapsed never refunds twice.
func (s *Service) payBack(ctx context.Context, o Order) (Order, error) {
	o = s.withPayment(ctx, o)
	if o.Payment == nil || o.Payment.Status == PaymentRefunded {
		return o, nil
	}
	claim := s.keys.Status(o.ID) + ":refund" // the status's hash tag: its slot
	claimed, err := s.rdb.SetNX(ctx, claim, "1", refundClaimTTL).Result()
	if err != nil || !claimed {
		return o, s.wrapUnavailable("claim the refund", err)
	}
	p := *o.Payment
	if err := s.refund(ctx, o.ID, p); err != nil {
		_ = s.rdb.Del(context.WithoutCancel(ctx), claim).Err() // the next call may try at once
		s.log.Warn("refund order: payment not refunded yet", "order", o.ID, "payment_ref", p.ID, "err", err)
		return Order{}, fmt.Errorf("refund order %s: %w: %w", o.ID, apperr.Unavailable("the payment could not be refunded; refund again"), err)
	}
	p.Status, p.RefundedCents, p.ClientSecret = PaymentRefunded, p.AmountCents, ""
	o.Payment = &p
	return o, nil
}

// wrapUnavailable is unavailable for an error that may be nil.
func (s *Service) wrapUnavailable(op string, err error) error {
	if err == nil {
		return nil
	}
	return s.unavailable(op, err)
}
