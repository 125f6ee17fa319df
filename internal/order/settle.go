package order

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// What a provider's report of a succeeded payment did to its order.
const (
	SettledPaid      = "paid"      // it paid the order
	SettledRefunded  = "refunded"  // the order was not payable: refunded in full
	SettledUnchanged = "unchanged" // the order was paid with it already
)

// findOrderByIDSQL is an order's status in PostgreSQL, whoever's it is (a
// provider's report names the order, not its buyer).
const findOrderByIDSQL = `
SELECT coalesce(t.status, 'confirmed'), coalesce(t.payment_ref, ''), o.total_cents
FROM orders o LEFT JOIN order_transitions t ON t.order_id = o.id WHERE o.id = $1`

// PaymentSucceeded applies a provider's report that payment p of order
// orderID succeeded (Stripe's payment_intent.succeeded, or reconcile
// finding it). The order becomes paid through the same step as Pay's, if
// it is still payable; otherwise p is refunded in full and the order
// keeps its status. Applying a report again changes nothing (the pay
// step and the refund are both keyed by p), so a report may come twice,
// late, or race Pay, the sweeper and a cancel.
//
// An error means the report could not be applied now (Redis or the
// provider did not answer, or the order is not written yet): apply it
// again later.
func (s *Service) PaymentSucceeded(ctx context.Context, orderID string, p Payment) (string, error) {
	p.Status, p.ClientSecret = PaymentSucceeded, ""
	if _, ok := parseID(orderID); !ok {
		// Not an order id of ours: an intent some other integration made.
		s.log.Warn("payment for an order id this shop never issues: ignored", "order", orderID, "payment_ref", p.ID)
		return SettledUnchanged, nil
	}
	if s.refundedAlready(ctx, p.ID) {
		return SettledUnchanged, nil // a report again, or reconcile seeing it again
	}
	if err := s.savePayment(ctx, orderID, p); err != nil {
		return "", s.unavailable("record payment", err)
	}
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	o, found, err := s.liveStatus(ctx, orderID)
	switch {
	case err != nil:
		return "", s.unavailable("order status", err)
	case !found:
		return s.settleForgotten(ctx, orderID, p)
	case o.TotalCents != p.AmountCents:
		// Not a payment this shop asked for: never let it pay the order.
		s.log.Error("payment amount is not the order's total: refunding it", "order", orderID,
			"payment_ref", p.ID, "amount_cents", p.AmountCents, "total_cents", o.TotalCents)
		return s.refunded(ctx, orderID, p)
	case o.Status == StatusPaid && o.paymentRef == p.ID:
		return SettledUnchanged, nil
	case o.Status == StatusPending:
		return "", ErrOrderPending // no payment is asked before the order is written
	case o.Status != StatusConfirmed:
		return s.refunded(ctx, orderID, p)
	}
	_, won, err := s.payStep(ctx, o, p)
	switch won {
	case payPaidNow:
		return SettledPaid, nil
	case payPaidBefore:
		return SettledUnchanged, nil // a report of it, or its Pay, came first
	case payLost:
		return s.refunded(ctx, orderID, p) // to expiry, a cancel or another payment
	}
	return "", err
}

// refundedAlready tells whether payment id's record says it was refunded
// in full (false when it cannot be read: refunding again is harmless).
func (s *Service) refundedAlready(ctx context.Context, id string) bool {
	var status string
	err := s.db.QueryRow(ctx, `SELECT status FROM payments WHERE id = $1`, id).Scan(&status)
	return err == nil && status == PaymentRefunded
}

// settleForgotten applies a succeeded payment of an order Redis no longer
// has (a week after it was placed) or never had: it can no longer be
// paid, so p is refunded unless it is what paid the order.
func (s *Service) settleForgotten(ctx context.Context, orderID string, p Payment) (string, error) {
	var status, ref string
	var total int64
	err := s.db.QueryRow(ctx, findOrderByIDSQL, orderID).Scan(&status, &ref, &total)
	switch {
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return "", s.unavailable("find order", err)
	case err == nil && status == StatusPaid && ref == p.ID:
		return SettledUnchanged, nil
	}
	return s.refunded(ctx, orderID, p)
}

// refunded refunds p, which cannot pay order orderID. Unlike Pay's
// refund of a payment that lost its race, a failure here is returned:
// the report is applied again later.
func (s *Service) refunded(ctx context.Context, orderID string, p Payment) (string, error) {
	if err := s.refund(ctx, orderID, p); err != nil {
		return "", s.unavailable("refund payment", err)
	}
	return SettledRefunded, nil
}

// PaymentFailed applies a provider's report that payment p of order
// orderID failed: the order stays as it is (payable again until its
// window closes, if it was), and its payment reads failed, unless a later
// word on p (succeeded, refunded) came first.
func (s *Service) PaymentFailed(ctx context.Context, orderID string, p Payment) error {
	p.Status, p.ClientSecret = PaymentFailed, ""
	if err := s.savePayment(ctx, orderID, p); err != nil {
		return s.unavailable("record payment", err)
	}
	return nil
}

// PaymentRefunded applies a provider's report that cents of payment id
// have been refunded (ours, or one made in the provider's dashboard); a
// payment this shop has no record of is ignored.
func (s *Service) PaymentRefunded(ctx context.Context, id string, cents int64) error {
	if err := s.recordRefunded(ctx, id, cents); err != nil {
		return s.unavailable("record refund", err)
	}
	return nil
}
