package draw

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/payment"
	"github.com/shop-oss/shop/internal/testenv"
)

// byKey groups the requests by their idempotency key (the step and the
// entry it names).
func byKey(seen []testenv.StripeRequest) map[string][]testenv.StripeRequest {
	out := map[string][]testenv.StripeRequest{}
	for _, s := range seen {
		out[s.Key] = append(out[s.Key], s)
	}
	return out
}

// A whole draw on Stripe's mock (which checks each request against
// Stripe's API spec), stopped once after a capture the provider answered
// and resumed: every entry is a manual-capture intent confirmed at once;
// the winners are captured for their units (the last in part), each
// capture asked again only with its first key and amount; the loser and
// the withdrawn entry are cancelled once; nothing else is asked.
func TestDrawOnStripe(t *testing.T) {
	t.Parallel()
	var calls testenv.StripeRecorder
	api := calls.Proxy(t, testenv.StripeMockWith(t, map[string]map[string]any{"payment_intent": {"status": "requires_capture"}}))
	f := newFixture(t)
	stripe := payment.NewStripe(payment.StripeOptions{SecretKey: "sk_test_123", APIURL: api, Currency: "usd", Timeout: 5 * time.Second})
	f.svc = New(f.db.Pool, stripe, slog.New(slog.DiscardHandler), Options{})
	f.withOrders()
	round := f.draw(t, "s", 5, 2)
	ctx := context.Background()
	entries := map[string]int{}
	for range 4 {
		entries[f.enter(t, f.user(t), "s", 2).ID] = 2
	}
	quitter := f.user(t)
	withdrawn := f.enter(t, quitter, "s", 1).ID
	if _, err := f.svc.Withdraw(ctx, quitter, "s"); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("crash")
	var captures int
	f.svc.InjectAfterCapture(func(string) error {
		if captures++; captures == 2 {
			return crash
		}
		return nil
	})
	if err := f.svc.Run(ctx, round); !errors.Is(err, crash) {
		t.Fatalf("first run: %v, want the crash", err)
	}
	if err := f.svc.Run(ctx, round); err != nil {
		t.Fatal(err)
	}
	ex := expect(f.seed(t, round), entries, 5, nil)
	got := byKey(calls.Seen())
	want := 5 + len(ex.won) + 1 + (len(entries) - len(ex.won)) + 1 // authorize, capture (one twice), cancel
	if n := len(calls.Seen()); n != want {
		t.Fatalf("%d requests to Stripe, want %d: %+v", n, want, calls.Seen())
	}
	for id, qty := range map[string]int{withdrawn: 1, ex.order[0]: 2, ex.order[1]: 2, ex.order[2]: 2, ex.order[3]: 2} {
		a := got["draw:"+id+":authorize"]
		if len(a) != 1 || a[0].Path != "/v1/payment_intents" || a[0].Form.Get("capture_method") != "manual" ||
			a[0].Form.Get("confirm") != "true" || a[0].Form.Get("amount") != strconv.Itoa(qty*100) {
			t.Errorf("entry %s: authorisations %+v, want one manual-capture intent of %d confirmed", id, a, qty*100)
		}
	}
	for i, id := range ex.order {
		caps, cancels := got["draw:"+id+":capture"], got["draw:"+id+":cancel"]
		won := ex.won[id]
		if won == 0 {
			if len(caps) != 0 || len(cancels) != 1 || !strings.HasSuffix(cancels[0].Path, "/cancel") {
				t.Errorf("loser %s: captures %+v, cancels %+v, want one cancel", id, caps, cancels)
			}
			continue
		}
		asked := 1
		if i == 1 {
			asked = 2 // the capture the crash left unrecorded, asked again with its key
		}
		if len(cancels) != 0 || len(caps) != asked {
			t.Errorf("winner %s: captures %+v, cancels %+v, want %d capture requests and no cancel", id, caps, cancels, asked)
		}
		for _, c := range caps {
			if !strings.HasSuffix(c.Path, "/capture") || c.Form.Get("amount_to_capture") != strconv.Itoa(won*100) {
				t.Errorf("winner %s: capture %+v, want amount_to_capture %d", id, c, won*100)
			}
		}
	}
	if c := got["draw:"+withdrawn+":cancel"]; len(c) != 1 {
		t.Errorf("withdrawn entry: cancels %+v, want one", c)
	}
}
