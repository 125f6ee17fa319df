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
	// Name is the provider's name in an order's payment ("test", "stripe").
	Name() string
	// Charge asks for the money. The payment's Status is PaymentSucceeded,
	// or the provider's word for a payment that needs more (the shopper's
	// 3-D Secure, a slow method), which its webhook finishes.
	// ErrPaymentDeclined: the token was refused; any other error means the
	// outcome is unknown (a retry with the same key finds out).
	Charge(ctx context.Context, c Charge) (Payment, error)
	// Refund gives the whole of payment id back, once however often it is
	// asked (a payment that lost the race to expiry or cancellation, or a
	// second one for an order already paid).
	Refund(ctx context.Context, id string) error
}

// Charge is one payment request.
type Charge struct {
	Key         string // idempotency key
	OrderID     string
	AmountCents int64
	Token       string
}

// Payment is what the provider said about one payment of an order: the
// order's `payment` (docs/api.md, Payments with Stripe).
type Payment struct {
	Provider      string `json:"provider"`
	ID            string `json:"id"`
	Status        string `json:"status"`
	AmountCents   int64  `json:"amount_cents"`
	RefundedCents int64  `json:"refunded_cents"`
	// ClientSecret lets the shopper's page finish a payment that needs
	// them; only while it does.
	ClientSecret string `json:"client_secret,omitempty"`
}

// Payment statuses of our own; any other is the provider's word for a
// payment under way (Stripe's requires_action, processing, ...).
const (
	PaymentSucceeded = "succeeded"
	PaymentFailed    = "failed"
	PaymentRefunded  = "refunded"
)

// paymentRank orders a payment's statuses: an update never moves one
// back, so a provider's events may arrive in any order.
func paymentRank(status string) int16 {
	switch status {
	case PaymentFailed:
		return 2
	case PaymentSucceeded:
		return 3
	case PaymentRefunded:
		return 4
	}
	return 1
}

// Settled tells whether the payment needs nothing more from the shopper.
func (p Payment) Settled() bool { return paymentRank(p.Status) > 1 }

// ErrPaymentDeclined: the provider refused the payment.
var ErrPaymentDeclined = errors.New("payment declined")

// DeclinedToken is the token the test provider declines.
const DeclinedToken = "tok_declined"

// TestProvider is the built-in `test` payment provider: it approves every
// token but DeclinedToken, and remembers its charges in memory (per
// process), by key, so that it charges each key once.
type TestProvider struct {
	mu       sync.Mutex
	byKey    map[string]string // key -> id
	charges  map[string]Charge // id -> charge
	refunded map[string]bool
	refunds  int                   // Refund calls, repeats included
	holds    map[string]*holdState // id -> an authorisation (hold.go)
	calls    map[string]int        // hold calls by kind
}

// NewTestProvider returns an empty test provider.
func NewTestProvider() *TestProvider {
	return &TestProvider{byKey: map[string]string{}, charges: map[string]Charge{}, refunded: map[string]bool{},
		holds: map[string]*holdState{}, calls: map[string]int{}}
}

// Name is "test".
func (p *TestProvider) Name() string { return "test" }

// Charge approves c unless its token is DeclinedToken.
func (p *TestProvider) Charge(_ context.Context, c Charge) (Payment, error) {
	if c.Token == DeclinedToken {
		return Payment{}, ErrPaymentDeclined
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.byKey[c.Key]
	if !ok {
		id = "ch_" + uuid.NewString()
		p.byKey[c.Key], p.charges[id] = id, c
	}
	return Payment{Provider: p.Name(), ID: id, Status: PaymentSucceeded, AmountCents: c.AmountCents}, nil
}

// Refund marks the charge id refunded.
func (p *TestProvider) Refund(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunded[id] = true
	p.refunds++
	return nil
}

// Charged returns the amount charged and not refunded for orderID: what a
// test checks to see that nobody was charged twice.
func (p *TestProvider) Charged(orderID string) (cents int64, charges int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, c := range p.charges {
		if c.OrderID == orderID && !p.refunded[id] {
			cents += c.AmountCents
			charges++
		}
	}
	return cents, charges
}

// Refunds counts the Refund calls made: a test checks that a losing
// payment was refunded once, not once per racer.
func (p *TestProvider) Refunds() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refunds
}
