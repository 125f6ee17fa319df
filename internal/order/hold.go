package order

import (
	"context"

	"github.com/google/uuid"
)

// Holds: money authorised now and captured or released later, the seam
// of draws (internal/draw). A provider that takes them offers Authorize,
// Capture and Cancel besides PaymentProvider's Charge.

// Authorizer holds money for an entry, then captures or releases it.
// Every call is idempotent by its key: the same key answers the first
// call's result and moves no money again.
type Authorizer interface {
	Name() string
	// Authorize holds c.AmountCents. The payment's Status is
	// PaymentAuthorized, or the provider's word for one that needs the
	// shopper (its ClientSecret finishes it). ErrPaymentDeclined: the
	// token was refused; another error: the outcome is unknown.
	Authorize(ctx context.Context, c Charge) (Payment, error)
	// Capture takes amountCents (at most the amount held) of hold id.
	// ErrPaymentDeclined: the capture failed for good (the card's), and
	// nothing was taken.
	Capture(ctx context.Context, id string, amountCents int64, key string) (Payment, error)
	// Cancel releases hold id.
	Cancel(ctx context.Context, id, key string) error
}

// PaymentAuthorized is a hold's status while it can be captured
// (Stripe's word).
const PaymentAuthorized = "requires_capture"

// PaymentCanceled is a released hold's status (Stripe's word).
const PaymentCanceled = "canceled"

// holdState is the test provider's record of one hold.
type holdState struct {
	charge   Charge
	captured int64
	canceled bool
}

// Authorize holds c unless its token is DeclinedToken.
func (p *TestProvider) Authorize(_ context.Context, c Charge) (Payment, error) {
	if c.Token == DeclinedToken {
		return Payment{}, ErrPaymentDeclined
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["authorize"]++
	id, ok := p.byKey[c.Key]
	if !ok {
		id = "pi_" + uuid.NewString()
		p.byKey[c.Key], p.holds[id] = id, &holdState{charge: c}
	}
	return Payment{Provider: p.Name(), ID: id, Status: PaymentAuthorized, AmountCents: c.AmountCents}, nil
}

// Capture takes amountCents of hold id, once per key.
func (p *TestProvider) Capture(_ context.Context, id string, amountCents int64, key string) (Payment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["capture"]++
	h := p.hold(id, amountCents)
	switch {
	case h.canceled || amountCents > h.charge.AmountCents:
		return Payment{}, ErrPaymentDeclined
	}
	if _, done := p.byKey[key]; !done {
		p.byKey[key] = id
		h.captured += amountCents
	}
	return Payment{Provider: p.Name(), ID: id, Status: PaymentSucceeded, AmountCents: h.captured}, nil
}

// Cancel releases hold id (a captured one stays captured).
func (p *TestProvider) Cancel(_ context.Context, id, key string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["cancel"]++
	h := p.hold(id, 0)
	if _, done := p.byKey[key]; !done && h.captured == 0 {
		p.byKey[key] = id
		h.canceled = true
	}
	return nil
}

// hold is the record of hold id. One this process did not make (another
// instance's, the test provider keeping its holds in memory) is taken as
// made for amountCents.
func (p *TestProvider) hold(id string, amountCents int64) *holdState {
	h, ok := p.holds[id]
	if !ok {
		h = &holdState{charge: Charge{AmountCents: amountCents}}
		p.holds[id] = h
	}
	return h
}

// Hold is what the test provider did with one hold: what a test checks
// to see that nothing was captured twice, nor captured and cancelled.
type Hold struct {
	AmountCents, CapturedCents int64
	Canceled                   bool
}

// Holds returns every hold the test provider made, by id.
func (p *TestProvider) Holds() map[string]Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Hold, len(p.holds))
	for id, h := range p.holds {
		out[id] = Hold{AmountCents: h.charge.AmountCents, CapturedCents: h.captured, Canceled: h.canceled}
	}
	return out
}

// Calls counts the provider's hold calls by kind (authorize, capture,
// cancel), repeats included.
func (p *TestProvider) Calls(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[kind]
}

var _ Authorizer = (*TestProvider)(nil)

// FindHold returns the hold an authorisation keyed key made, if any (the
// draw's HoldFinder): a hold whose record a crash lost is still released.
func (p *TestProvider) FindHold(_ context.Context, key string) (Payment, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.byKey[key]
	if !ok {
		return Payment{}, false, nil
	}
	h := p.holds[id]
	status := PaymentAuthorized
	if h.canceled {
		status = PaymentCanceled
	}
	return Payment{Provider: p.Name(), ID: id, Status: status, AmountCents: h.charge.AmountCents}, true, nil
}
