// Package payment owns the real payment providers behind order's
// PaymentProvider seam: Stripe's PaymentIntents, through the official
// stripe-go client. The order's Redis status stays the only judge of
// paid, expired and cancelled (order's lifecycle); this package moves the
// money and says what the provider answered. More in docs/design/payments.md.
package payment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/shop-oss/shop/internal/order"
)

// StripeOptions configure a Stripe provider.
type StripeOptions struct {
	SecretKey string
	// APIURL is Stripe's API (empty: Stripe's own); a stripe-mock's in tests.
	APIURL   string
	Currency string
	// Timeout bounds one call to Stripe, retries included (0: 10 s).
	Timeout time.Duration
}

// Stripe takes payments with Stripe's PaymentIntents API.
type Stripe struct {
	sc       *stripe.Client
	currency string
	timeout  time.Duration
}

// NewStripe returns a Stripe provider. stripe-go retries a failed network
// call (twice by default) with the same idempotency key, so a retry never
// makes a second intent.
func NewStripe(o StripeOptions) *Stripe {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	cfg := &stripe.BackendConfig{
		HTTPClient:    &http.Client{Timeout: o.Timeout},
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if o.APIURL != "" {
		cfg.URL = stripe.String(o.APIURL)
	}
	api := stripe.GetBackendWithConfig(stripe.APIBackend, cfg)
	sc := stripe.NewClient(o.SecretKey, stripe.WithBackends(&stripe.Backends{API: api, Connect: api, Uploads: api,
		MeterEvents: api}))
	return &Stripe{sc: sc, currency: o.Currency, timeout: o.Timeout}
}

// Intent is what Stripe answered for one PaymentIntent.
type Intent struct {
	ID           string
	Status       string // Stripe's: succeeded, requires_action, processing, ...
	ClientSecret string
	AmountCents  int64
	OrderID      string // metadata.order_id
	EntryID      string // metadata.draw_entry_id: a draw entry's hold
}

// ErrIncomplete: the intent needs more than its confirmation (3-D
// Secure, a slow method); Incomplete says which.
var ErrIncomplete = errors.New("payment incomplete")

// Incomplete is an intent that did not succeed at once.
type Incomplete struct{ Intent Intent }

func (e *Incomplete) Error() string {
	return fmt.Sprintf("payment intent %s: %s", e.Intent.ID, e.Intent.Status)
}

// Is makes errors.Is(err, ErrIncomplete) hold.
func (e *Incomplete) Is(target error) bool { return target == ErrIncomplete }

// Pay creates and confirms order c's PaymentIntent with the token as its
// PaymentMethod, keyed by c.Key: the same key answers the same intent.
// Errors: order.ErrPaymentDeclined (a card error), *Incomplete, or
// another error when the outcome is unknown (Stripe unreachable or
// erring: a retry with the same key finds out).
func (p *Stripe) Pay(ctx context.Context, c order.Charge) (Intent, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pi, err := p.sc.V1PaymentIntents.Create(ctx, p.cardIntent(c, "order_id"))
	if err != nil {
		return Intent{}, providerError("create payment intent", err)
	}
	in := intentOf(pi)
	if pi.Status != stripe.PaymentIntentStatusSucceeded {
		return in, &Incomplete{Intent: in}
	}
	return in, nil
}

// cardIntent is the confirmed intent charging c's card, keyed by c.Key so
// that a retry answers the first call's intent; c.OrderID is kept in the
// metadata under idName (an order's or a draw entry's), so that an intent
// seen in Stripe's dashboard says what it paid for.
func (p *Stripe) cardIntent(c order.Charge, idName string) *stripe.PaymentIntentCreateParams {
	params := &stripe.PaymentIntentCreateParams{
		Amount:             stripe.Int64(c.AmountCents),
		Currency:           stripe.String(p.currency),
		PaymentMethod:      stripe.String(c.Token),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}), // no redirect, so no return_url
		Confirm:            stripe.Bool(true),
		Metadata:           map[string]string{idName: c.OrderID},
	}
	params.SetIdempotencyKey(c.Key)
	return params
}

// Name is "stripe".
func (p *Stripe) Name() string { return "stripe" }

// Charge is Pay as order's PaymentProvider: an intent that needs more is
// a payment under way (its status and client_secret), not an error.
func (p *Stripe) Charge(ctx context.Context, c order.Charge) (order.Payment, error) {
	in, err := p.Pay(ctx, c)
	if err != nil && !errors.Is(err, ErrIncomplete) {
		return order.Payment{}, err
	}
	return in.Payment(), nil
}

// Payment is the intent as an order's payment.
func (in Intent) Payment() order.Payment {
	return order.Payment{Provider: "stripe", ID: in.ID, Status: in.Status, AmountCents: in.AmountCents,
		ClientSecret: in.ClientSecret}
}

var _ order.PaymentProvider = (*Stripe)(nil)

// Refund gives back the whole of intent ref, once: Stripe's idempotency
// key is the intent's, so a second call answers the first refund.
func (p *Stripe) Refund(ctx context.Context, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(ref)}
	params.SetIdempotencyKey("refund:" + ref)
	if _, err := p.sc.V1Refunds.Create(ctx, params); err != nil {
		return providerError("refund "+ref, err)
	}
	return nil
}

// Intents lists the intents created since since, newest first, as
// Stripe's list gives them (reconciliation).
func (p *Stripe) Intents(ctx context.Context, since time.Time, each func(Intent) error) error {
	params := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix()}}
	for pi, err := range p.sc.V1PaymentIntents.List(ctx, params) {
		if err != nil {
			return providerError("list payment intents", err)
		}
		if err := each(intentOf(pi)); err != nil {
			return err
		}
	}
	return nil
}

func intentOf(pi *stripe.PaymentIntent) Intent {
	return Intent{ID: pi.ID, Status: string(pi.Status), ClientSecret: pi.ClientSecret, AmountCents: pi.Amount,
		OrderID: pi.Metadata["order_id"], EntryID: pi.Metadata["draw_entry_id"]}
}

// providerError tells a card refused (order.ErrPaymentDeclined) from a
// call whose outcome is unknown.
func providerError(op string, err error) error {
	var se *stripe.Error
	if errors.As(err, &se) && se.Type == stripe.ErrorTypeCard {
		return fmt.Errorf("stripe: %s: %w: %s (%s)", op, order.ErrPaymentDeclined, se.Msg, se.DeclineCode)
	}
	return fmt.Errorf("stripe: %s: %w", op, err)
}
