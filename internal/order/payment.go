package order

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"
)

// PaymentProvider is the seam to whoever moves the money. Charge must be
// idempotent by Charge.Key: a second call with the same key charges
// nothing more and answers what the first did (every real provider offers
// such keys), which is what makes a retried pay safe.
type PaymentProvider interface {
	// Charge takes the money and returns the provider's reference of the
	// charge. ErrPaymentDeclined: the token was refused; any other error
	// means the outcome is unknown (a retry with the same key finds out).
	Charge(ctx context.Context, c Charge) (ref string, err error)
	// Refund gives a charge back (a payment that lost the race to expiry
	// or cancellation, or a second charge for an order already paid).
	Refund(ctx context.Context, ref string) error
}

// Charge is one payment request.
type Charge struct {
	Key         string // idempotency key
	OrderID     string
	AmountCents int64
	Token       string
}

// ErrPaymentDeclined: the provider refused the payment.
var ErrPaymentDeclined = errors.New("payment declined")

// DeclinedToken is the token the test provider declines.
const DeclinedToken = "tok_declined"

// TestProvider is the built-in `test` payment provider: it approves every
// token but DeclinedToken, and remembers its charges in memory (per
// process), by key, so that it charges each key once.
type TestProvider struct {
	mu       sync.Mutex
	byKey    map[string]string // key -> ref
	charges  map[string]Charge // ref -> charge
	refunded map[string]bool
}

// NewTestProvider returns an empty test provider.
func NewTestProvider() *TestProvider {
	return &TestProvider{byKey: map[string]string{}, charges: map[string]Charge{}, refunded: map[string]bool{}}
}

// Charge approves c unless its token is DeclinedToken.
func (p *TestProvider) Charge(_ context.Context, c Charge) (string, error) {
	if c.Token == DeclinedToken {
		return "", ErrPaymentDeclined
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ref, ok := p.byKey[c.Key]; ok {
		return ref, nil
	}
	ref := "ch_" + uuid.NewString()
	p.byKey[c.Key], p.charges[ref] = ref, c
	return ref, nil
}

// Refund marks the charge ref refunded.
func (p *TestProvider) Refund(_ context.Context, ref string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunded[ref] = true
	return nil
}

// Charged returns the amount charged and not refunded for orderID: what a
// test checks to see that nobody was charged twice.
func (p *TestProvider) Charged(orderID string) (cents int64, charges int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ref, c := range p.charges {
		if c.OrderID == orderID && !p.refunded[ref] {
			cents += c.AmountCents
			charges++
		}
	}
	return cents, charges
}
