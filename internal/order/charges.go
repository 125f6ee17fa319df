package order

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/api"
)

// The payments table (migration 00006) records each charge before the
// order is marked paid, so that a pay retried after a crash between the
// two reuses the charge rather than making another: the provider's own
// idempotency key covers a retry within its memory, this covers a restart
// of ours (and the test provider, which forgets everything).

const (
	selectChargeSQL = `SELECT payment_ref FROM payments WHERE charge_key = $1 AND refunded_at IS NULL`
	// insertChargeSQL keeps the first charge of a key: of two pays with
	// the same token racing, the second learns the first's reference.
	insertChargeSQL = `
WITH ins AS (
    INSERT INTO payments (charge_key, order_id, amount_cents, payment_ref) VALUES ($1, $2, $3, $4)
    ON CONFLICT (charge_key) DO NOTHING RETURNING payment_ref)
SELECT payment_ref FROM ins UNION ALL SELECT payment_ref FROM payments WHERE charge_key = $1
LIMIT 1`
	refundChargeSQL = `UPDATE payments SET refunded_at = now() WHERE payment_ref = $1 AND refunded_at IS NULL`
)

// charge returns the reference of the charge for c: the one recorded for
// its key when there is one (nothing is charged), else a new charge of the
// provider, recorded before it is returned. Errors: ErrDeclined, or a 503
// (the provider or PostgreSQL did not answer; paying again charges at most
// once).
func (s *Service) charge(ctx context.Context, c Charge) (string, error) {
	var ref string
	err := s.db.QueryRow(ctx, selectChargeSQL, c.Key).Scan(&ref)
	switch {
	case err == nil:
		return ref, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return "", s.unavailable("read charge", err)
	}
	ref, err = s.payments.Charge(ctx, c)
	switch {
	case errors.Is(err, ErrPaymentDeclined):
		return "", ErrDeclined
	case err != nil:
		s.log.Warn("payment provider", "order", c.OrderID, "err", err)
		return "", fmt.Errorf("charge order %s: %w: %w", c.OrderID, api.Unavailable("the payment provider is unavailable"), err)
	}
	var kept string
	if err := s.db.QueryRow(ctx, insertChargeSQL, c.Key, c.OrderID, c.AmountCents, ref).Scan(&kept); err != nil {
		// Not recorded: a retry with the same token reaches the provider
		// again, whose key makes it the same charge.
		return "", s.unavailable("record charge", err)
	}
	if kept != ref {
		s.refund(ctx, c.OrderID, ref) // a concurrent pay recorded its charge first
	}
	return kept, nil
}
