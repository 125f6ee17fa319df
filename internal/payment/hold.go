package payment

import (
	"context"

	"github.com/stripe/stripe-go/v82"

	"github.com/shop-oss/shop/internal/order"
)

// Holds for draws (order.Authorizer): a PaymentIntent with
// capture_method=manual, confirmed at once, then captured (in part) or
// cancelled. Each call carries its own idempotency key, so a call asked
// again after a crash answers the first one's result.

// Authorize creates and confirms c's manual-capture intent, keyed by
// c.Key; its status is requires_capture when the card is held.
func (p *Stripe) Authorize(ctx context.Context, c order.Charge) (order.Payment, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	params := p.cardIntent(c, "draw_entry_id")
	params.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual)) // hold, capture later
	pi, err := p.sc.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return order.Payment{}, providerError("authorize", err)
	}
	return intentOf(pi).Payment(), nil
}

// Capture takes amountCents of intent id.
func (p *Stripe) Capture(ctx context.Context, id string, amountCents int64, key string) (order.Payment, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	params := &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(amountCents)}
	params.SetIdempotencyKey(key)
	pi, err := p.sc.V1PaymentIntents.Capture(ctx, id, params)
	if err != nil {
		return order.Payment{}, providerError("capture "+id, err)
	}
	return intentOf(pi).Payment(), nil
}

// Cancel releases intent id.
func (p *Stripe) Cancel(ctx context.Context, id, key string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	params := &stripe.PaymentIntentCancelParams{}
	params.SetIdempotencyKey(key)
	if _, err := p.sc.V1PaymentIntents.Cancel(ctx, id, params); err != nil {
		return providerError("cancel "+id, err)
	}
	return nil
}

var _ order.Authorizer = (*Stripe)(nil)
