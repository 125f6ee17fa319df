package payment_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/payment"
	"github.com/shop-oss/shop/internal/testenv"
)

func provider(apiURL string) *payment.Stripe {
	return payment.NewStripe(payment.StripeOptions{SecretKey: "sk_test_123", APIURL: apiURL, Currency: "usd",
		Timeout: 5 * time.Second})
}

var charge = order.Charge{Key: "order:o-1:0a1b2c3d", OrderID: "o-1", AmountCents: 1999, Token: "pm_card_visa"}

// Stripe's mock checks every request against Stripe's API spec: a pay is
// one PaymentIntent, confirmed at once with the token as its payment
// method, the order's amount and id, keyed by the charge's key. The
// bundled answer (requires_payment_method) is an incomplete payment.
func TestPayMakesOneConfirmedIntent(t *testing.T) {
	t.Parallel()
	var rec testenv.StripeRecorder
	p := provider(rec.Proxy(t, testenv.StripeMock(t)))
	in, err := p.Pay(context.Background(), charge)
	var inc *payment.Incomplete
	if !errors.As(err, &inc) || !errors.Is(err, payment.ErrIncomplete) || inc.Intent.Status != "requires_payment_method" {
		t.Fatalf("pay: %+v %v, want an incomplete intent", in, err)
	}
	if !strings.HasPrefix(in.ID, "pi_") || in.ClientSecret == "" || in.AmountCents != charge.AmountCents {
		t.Fatalf("intent %+v", in)
	}
	if len(rec.Seen()) != 1 {
		t.Fatalf("%d requests, want 1: %+v", len(rec.Seen()), rec.Seen())
	}
	r := rec.Seen()[0]
	want := map[string]string{"amount": "1999", "currency": "usd", "payment_method": "pm_card_visa", "confirm": "true",
		"metadata[order_id]": "o-1", "payment_method_types[0]": "card"}
	for k, v := range want {
		if r.Form.Get(k) != v {
			t.Errorf("%s = %q, want %q (form %v)", k, r.Form.Get(k), v, r.Form)
		}
	}
	if r.Method != http.MethodPost || r.Path != "/v1/payment_intents" || r.Key != charge.Key {
		t.Fatalf("request %s %s key %q, want POST /v1/payment_intents key %q", r.Method, r.Path, r.Key, charge.Key)
	}
}

// A succeeded intent is a payment: its id is the charge's reference.
func TestPaySucceeded(t *testing.T) {
	t.Parallel()
	p := provider(testenv.StripeMockWith(t, map[string]map[string]any{"payment_intent": {"status": "succeeded"}}))
	pay, err := p.Charge(context.Background(), charge)
	if err != nil || !strings.HasPrefix(pay.ID, "pi_") || pay.Status != order.PaymentSucceeded || pay.Provider != "stripe" {
		t.Fatalf("charge: %+v %v", pay, err)
	}
}

// A card error is a decline; Stripe erring or out of reach is an
// unknown outcome (order answers it 503 and keeps the order payable).
func TestPayErrors(t *testing.T) {
	t.Parallel()
	declined := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(`{"error":{"type":"card_error","code":"card_declined","decline_code":"generic_decline",` +
			`"message":"Your card was declined."}}`))
	}))
	defer declined.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"Something went wrong."}}`))
	}))
	defer failing.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()

	for _, c := range []struct {
		name     string
		url      string
		declined bool
	}{
		{"card declined", declined.URL, true},
		{"stripe erring", failing.URL, false},
		{"stripe unreachable", closed, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := provider(c.url).Pay(context.Background(), charge)
			if err == nil || errors.Is(err, order.ErrPaymentDeclined) != c.declined || errors.Is(err, payment.ErrIncomplete) {
				t.Fatalf("pay: %v, want declined %v", err, c.declined)
			}
		})
	}
}

// A refund is of the whole intent, keyed by it: a second refund of the
// same intent answers the first.
func TestRefundIsKeyedByTheIntent(t *testing.T) {
	t.Parallel()
	var rec testenv.StripeRecorder
	p := provider(rec.Proxy(t, testenv.StripeMock(t)))
	for range 2 {
		if err := p.Refund(context.Background(), "pi_123"); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rec.Seen() {
		if r.Path != "/v1/refunds" || r.Form.Get("payment_intent") != "pi_123" || r.Form.Get("amount") != "" ||
			r.Key != "refund:pi_123" {
			t.Fatalf("refund request %+v", r)
		}
	}
}

// The provider's own list of intents, for reconciliation.
func TestIntentsLists(t *testing.T) {
	t.Parallel()
	var rec testenv.StripeRecorder
	p := provider(rec.Proxy(t, testenv.StripeMock(t)))
	since := time.Now().Add(-24 * time.Hour)
	var got []payment.Intent
	if err := p.Intents(context.Background(), since, func(in payment.Intent) error { got = append(got, in); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !strings.HasPrefix(got[0].ID, "pi_") {
		t.Fatalf("intents %+v", got)
	}
	if r := rec.Seen()[0]; r.Method != http.MethodGet || r.Path != "/v1/payment_intents" {
		t.Fatalf("list request %+v", r)
	}
}
