package order

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The payments table (migration 00010) is this package's: what each
// provider said about each payment of an order. An update never moves a
// payment's status back (status_rank), so the synchronous answer and the
// webhook's events may land in any order.
const (
	savePaymentSQL = `
INSERT INTO payments (id, provider, order_id, status, status_rank, amount_cents, client_secret)
VALUES ($1, $2, $3, $4, $5::smallint, $6, CASE WHEN $5::smallint = 1 THEN $7 ELSE '' END)
ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, status_rank = EXCLUDED.status_rank,
    client_secret = EXCLUDED.client_secret, updated_at = now()
WHERE payments.status_rank <= EXCLUDED.status_rank`

	// A refund (ours, or one made in the provider's dashboard) only ever
	// grows; a full one settles the payment as refunded.
	refundedSQL = `
UPDATE payments SET refunded_cents = greatest(refunded_cents, least($2, amount_cents)),
    status = CASE WHEN greatest(refunded_cents, $2) >= amount_cents THEN 'refunded' ELSE status END,
    status_rank = CASE WHEN greatest(refunded_cents, $2) >= amount_cents THEN 4 ELSE status_rank END,
    client_secret = '', updated_at = now()
WHERE id = $1`

	// Each order's payment: the one it was paid with, else its latest.
	paymentsOfSQL = `
SELECT DISTINCT ON (order_id) order_id, provider, id, status, amount_cents, refunded_cents, client_secret
FROM payments WHERE order_id = ANY($1)
ORDER BY order_id, (id = ANY($2)) DESC, updated_at DESC, id`
)

// paymentTimeout bounds each read or write of the payments table.
const paymentTimeout = 3 * time.Second

// savePayment records what the provider answered for order orderID.
func (s *Service) savePayment(ctx context.Context, orderID string, p Payment) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), paymentTimeout)
	defer cancel()
	oid, err := uuid.Parse(orderID)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, savePaymentSQL, p.ID, p.Provider, oid, p.Status, paymentRank(p.Status),
		p.AmountCents, p.ClientSecret)
	return err
}

// recordRefunded records that cents of payment id have been refunded.
func (s *Service) recordRefunded(ctx context.Context, id string, cents int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), paymentTimeout)
	defer cancel()
	_, err := s.db.Exec(ctx, refundedSQL, id, cents)
	return err
}

// withPayments gives each order its payment. Redis keeps an order's
// lifecycle, PostgreSQL its payments: without PostgreSQL a paid order
// still shows the payment its status names, and the others none.
func (s *Service) withPayments(ctx context.Context, orders []Order) {
	var ids []uuid.UUID
	var refs []string
	for _, o := range orders {
		if o.Status == StatusPending {
			continue // no payment can be asked of an order before it is written
		}
		if id, err := uuid.Parse(o.ID); err == nil {
			ids = append(ids, id)
		}
		if o.paymentRef != "" {
			refs = append(refs, o.paymentRef)
		}
	}
	if len(ids) == 0 {
		return
	}
	found, err := s.paymentsOf(ctx, ids, refs)
	if err != nil {
		s.log.Warn("order payments", "err", err)
	}
	for i := range orders {
		o := &orders[i]
		if p, ok := found[o.ID]; ok {
			o.Payment = &p
		} else if o.paymentRef != "" {
			o.Payment = &Payment{Provider: s.payments.Name(), ID: o.paymentRef, Status: PaymentSucceeded,
				AmountCents: o.TotalCents}
		}
	}
}

func (s *Service) paymentsOf(ctx context.Context, ids []uuid.UUID, refs []string) (map[string]Payment, error) {
	ctx, cancel := context.WithTimeout(ctx, paymentTimeout)
	defer cancel()
	rows, err := s.db.Query(ctx, paymentsOfSQL, ids, refs)
	if err != nil {
		return nil, err
	}
	out := map[string]Payment{}
	var oid uuid.UUID
	var p Payment
	_, err = pgx.ForEachRow(rows, []any{&oid, &p.Provider, &p.ID, &p.Status, &p.AmountCents, &p.RefundedCents,
		&p.ClientSecret}, func() error {
		out[oid.String()] = p
		return nil
	})
	return out, err
}

// withPayment is withPayments for one order.
func (s *Service) withPayment(ctx context.Context, o Order) Order {
	one := []Order{o}
	s.withPayments(ctx, one)
	return one[0]
}
