package payment_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/testenv"
)

// A draw's hold on Stripe's mock (which checks each request against
// Stripe's API spec): a manual-capture intent confirmed at once, then a
// capture of part of it and a cancel, each with its own key.
func TestHoldCaptureCancelOnStripe(t *testing.T) {
	t.Parallel()
	var rec testenv.StripeRecorder
	p := provider(rec.Proxy(t, testenv.StripeMock(t)))
	ctx := context.Background()
	hold := order.Charge{Key: "draw:e-1:authorize", OrderID: "e-1", AmountCents: 3000, Token: "pm_card_visa"}
	pay, err := p.Authorize(ctx, hold)
	if err != nil || !strings.HasPrefix(pay.ID, "pi_") || pay.Provider != "stripe" {
		t.Fatalf("authorize: %+v %v", pay, err)
	}
	if _, err := p.Capture(ctx, pay.ID, 1000, "draw:e-1:capture"); err != nil {
		t.Fatalf("capture: %v", err)
	}
	if err := p.Cancel(ctx, pay.ID, "draw:e-1:cancel"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if len(rec.Seen()) != 3 {
		t.Fatalf("%d requests, want 3: %+v", len(rec.Seen()), rec.Seen())
	}
	want := []struct {
		path, key string
		form      map[string]string
	}{
		{"/v1/payment_intents", hold.Key, map[string]string{"amount": "3000", "capture_method": "manual",
			"confirm": "true", "payment_method": "pm_card_visa", "metadata[draw_entry_id]": "e-1"}},
		{"/v1/payment_intents/" + pay.ID + "/capture", "draw:e-1:capture", map[string]string{"amount_to_capture": "1000"}},
		{"/v1/payment_intents/" + pay.ID + "/cancel", "draw:e-1:cancel", nil},
	}
	for i, w := range want {
		r := rec.Seen()[i]
		if r.Method != http.MethodPost || r.Path != w.path || r.Key != w.key {
			t.Errorf("request %d: %s %s key %q, want POST %s key %q", i, r.Method, r.Path, r.Key, w.path, w.key)
		}
		for k, v := range w.form {
			if r.Form.Get(k) != v {
				t.Errorf("request %d: %s = %q, want %q", i, k, r.Form.Get(k), v)
			}
		}
	}
}
