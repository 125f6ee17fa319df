// Package paymenttest tests payments with Stripe through the whole
// application: `shop serve`'s routes against Stripe's own stripe-mock,
// with webhooks signed by stripe-go's test helper.
package paymenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/payment"
	"github.com/shop-oss/shop/internal/shop"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

const secret = "whsec_test_secret"

// stripeProxy stands between the shop and a stripe-mock that a test may
// swap (to one whose fixtures know an order) or take away (Stripe down),
// and counts the refunds asked of it.
type stripeProxy struct {
	target      atomic.Pointer[url.URL]
	down        atomic.Bool // every call dropped
	refundsDown atomic.Bool // refunds answered 500
	mu          sync.Mutex
	refunds     []url.Values
	createKeys  []string // the Idempotency-Key of each intent created
	URL         string
}

func newStripeProxy(t testing.TB, mock string) *stripeProxy {
	p := &stripeProxy{}
	p.point(t, mock)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			// As a dead connection would: no answer at all.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
					return
				}
			}
		}
		raw, _ := io.ReadAll(r.Body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
		if r.URL.Path == "/v1/refunds" && p.refundsDown.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"Something went wrong."}}`))
			return
		}
		p.mu.Lock()
		switch {
		case r.URL.Path == "/v1/refunds":
			form, _ := url.ParseQuery(string(raw))
			p.refunds = append(p.refunds, form)
		case r.URL.Path == "/v1/payment_intents" && r.Method == http.MethodPost:
			p.createKeys = append(p.createKeys, r.Header.Get("Idempotency-Key"))
		}
		p.mu.Unlock()
		httputil.NewSingleHostReverseProxy(p.target.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *stripeProxy) point(t testing.TB, mock string) {
	u, err := url.Parse(mock)
	if err != nil {
		t.Fatal(err)
	}
	p.target.Store(u)
}

// refundsOf counts the refunds asked for intent pi.
func (p *stripeProxy) refundsOf(pi string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, f := range p.refunds {
		if f.Get("payment_intent") == pi {
			n++
		}
	}
	return n
}

type fixture struct {
	*shoptest.App
	stripe *stripeProxy
}

func newFixture(t testing.TB, edit ...func(*config.Config)) fixture {
	t.Helper()
	proxy := newStripeProxy(t, testenv.StripeMock(t))
	app := shoptest.New(t, shoptest.Options{Config: func(c *config.Config) {
		c.PaymentProvider, c.StripeSecretKey, c.StripeWebhookSecret = "stripe", "sk_test_123", secret
		c.StripeAPIURL = proxy.URL
		for _, e := range edit {
			e(c)
		}
	}})
	return fixture{app, proxy}
}

// confirmedOrder is a written order of one unit at 300 cents, and its
// buyer's token.
func (f fixture) confirmedOrder(t testing.TB, sku string) (id, token string) {
	t.Helper()
	_, token = f.Shopper(t, uuid.NewString()+"@example.com")
	r := f.Do(t, "POST", "/api/v1/products/"+sku+"/purchase", token, `{"quantity":1}`)
	shoptest.WantStatus(t, r, http.StatusAccepted)
	f.Drain(t)
	return r.JSON(t)["order_id"].(string), token
}

// pay pays with a test card: stripe-mock's intent needs more (its
// bundled answer is requires_payment_method), so 202; it returns the
// intent's id.
func (f fixture) pay(t *testing.T, id, token string) string {
	t.Helper()
	r := f.Do(t, "POST", "/api/v1/orders/"+id+"/pay", token, `{"payment_token":"pm_card_visa"}`)
	shoptest.WantStatus(t, r, http.StatusAccepted)
	o := r.JSON(t)
	p, _ := o["payment"].(map[string]any)
	if o["status"] != "confirmed" || p == nil || p["provider"] != "stripe" || p["status"] != "requires_payment_method" ||
		p["client_secret"] == "" || p["amount_cents"] != 300.0 || p["refunded_cents"] != 0.0 {
		t.Fatalf("202 order %s", r.Body)
	}
	return p["id"].(string)
}

// event is a Stripe event of type typ whose object is obj.
func event(id, typ string, obj map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2025-08-27.basil",
		"created": time.Now().Unix(), "data": map[string]any{"object": obj}})
	return b
}

func intent(pi, orderID, status string, cents int64) map[string]any {
	return map[string]any{"id": pi, "object": "payment_intent", "status": status, "amount": cents,
		"currency": "usd", "metadata": map[string]string{"order_id": orderID}}
}

// deliver posts body signed with secret at time at, as Stripe would.
func (f fixture) deliver(t testing.TB, body []byte, key string, at time.Time) openapitest.Reply {
	t.Helper()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: key, Timestamp: at})
	return f.Do(t, "POST", "/api/v1/payments/stripe/webhook", "", string(body), "Stripe-Signature", signed.Header)
}

func (f fixture) order(t *testing.T, id, token string) map[string]any {
	t.Helper()
	r := f.Do(t, "GET", "/api/v1/orders/"+id, token, "")
	shoptest.WantStatus(t, r, http.StatusOK)
	return r.JSON(t)
}

// audited drains the order stream and runs shop audit: clean, so that
// no unit was sold twice or given back twice.
func (f fixture) audited(t *testing.T) {
	t.Helper()
	f.Drain(t)
	rep, err := f.Audit.Run(context.Background())
	if err != nil || !rep.OK {
		t.Fatalf("audit: %v %+v", err, rep.Problems)
	}
}

func (f fixture) count(t testing.TB, query string) int64 {
	t.Helper()
	return ordertesting.Count(t, f.DB.Pool, query)
}

// Pay makes one intent that needs more (202, the order still payable);
// the webhook's failure leaves it payable, its success pays it once even
// when delivered twenty times at once, and a refund made in Stripe's
// dashboard shows on the order.
func TestPayThenWebhooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Sale(t, "stripe-life", 300, 5, 0)
	id, tok := f.confirmedOrder(t, "stripe-life")
	if o := f.order(t, id, tok); o["payment"] != nil {
		t.Fatalf("payment before paying: %v", o["payment"])
	}
	pi := f.pay(t, id, tok)
	if p := f.order(t, id, tok)["payment"].(map[string]any); p["id"] != pi || p["client_secret"] == "" {
		t.Fatalf("order's payment %v", p)
	}

	r := f.deliver(t, event("evt_failed_1", "payment_intent.payment_failed", intent(pi, id, "requires_payment_method", 300)), secret, time.Now())
	shoptest.WantStatus(t, r, http.StatusOK)
	o := f.order(t, id, tok)
	if p := o["payment"].(map[string]any); o["status"] != "confirmed" || p["status"] != "failed" || p["client_secret"] != nil {
		t.Fatalf("after payment_failed: %v", o)
	}

	succeeded := event("evt_succeeded_1", "payment_intent.succeeded", intent(pi, id, "succeeded", 300))
	var ops []func()
	for range 20 {
		ops = append(ops, func() {
			if r := f.deliver(t, succeeded, secret, time.Now()); r.Status != http.StatusOK {
				t.Errorf("delivery: %d %s", r.Status, r.Body)
			}
		})
	}
	ordertesting.Together(ops...)
	o = f.order(t, id, tok)
	p := o["payment"].(map[string]any)
	if o["status"] != "paid" || o["paid_at"] == nil || p["status"] != "succeeded" || p["id"] != pi {
		t.Fatalf("after 20 deliveries of the success: %v", o)
	}
	if n := f.count(t, `SELECT count(*) FROM payment_events WHERE applied_at IS NOT NULL`); n != 2 {
		t.Fatalf("%d events applied, want 2", n)
	}
	applied := shoptest.Counters(t, f.Reg, "shop_payment_events_total", "type", "payment_intent.succeeded", "outcome", "applied")
	repeats := shoptest.Counters(t, f.Reg, "shop_payment_events_total", "type", "payment_intent.succeeded", "outcome", "repeat")
	if len(applied) != 1 || applied[0] != 1 || len(repeats) != 1 || repeats[0] != 19 {
		t.Fatalf("the success applied %v times, answered as a repeat %v times; want 1 and 19", applied, repeats)
	}
	if n := f.stripe.refundsOf(pi); n != 0 {
		t.Fatalf("%d refunds of a payment that paid its order", n)
	}
	again := f.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"pm_card_visa"}`)
	if again.Status != http.StatusOK || again.JSON(t)["status"] != "paid" {
		t.Fatalf("pay a paid order: %d %s", again.Status, again.Body)
	}

	charge := map[string]any{"id": "ch_1", "object": "charge", "amount": 300, "amount_refunded": 120,
		"payment_intent": pi, "refunded": false}
	shoptest.WantStatus(t, f.deliver(t, event("evt_refund_1", "charge.refunded", charge), secret, time.Now()), http.StatusOK)
	if p := f.order(t, id, tok)["payment"].(map[string]any); p["refunded_cents"] != 120.0 || p["status"] != "succeeded" {
		t.Fatalf("after a partial refund: %v", p)
	}
	f.audited(t)
	if st := f.order(t, id, tok)["status"]; st != "paid" {
		t.Fatalf("status %v", st)
	}
}

// A success for an order cancelled meanwhile is refunded in full through
// the API, once, and never revives the order.
func TestSuccessAfterCancelIsRefunded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Sale(t, "stripe-late", 300, 5, 0)
	id, tok := f.confirmedOrder(t, "stripe-late")
	pi := f.pay(t, id, tok)
	r := f.Do(t, "POST", "/api/v1/orders/"+id+"/cancel", tok, "")
	shoptest.WantStatus(t, r, http.StatusOK)
	for _, evt := range []string{"evt_a", "evt_a", "evt_b"} { // a repeat, and another event of the same intent
		shoptest.WantStatus(t, f.deliver(t, event(evt, "payment_intent.succeeded", intent(pi, id, "succeeded", 300)), secret, time.Now()), http.StatusOK)
	}
	o := f.order(t, id, tok)
	p := o["payment"].(map[string]any)
	if o["status"] != "cancelled" || p["status"] != "refunded" || p["refunded_cents"] != 300.0 {
		t.Fatalf("cancelled order after the success: %v", o)
	}
	if n := f.stripe.refundsOf(pi); n != 1 {
		t.Fatalf("%d refunds asked of Stripe, want 1", n)
	}
	st := f.Do(t, "GET", "/api/v1/admin/products/stripe-late/stock", admin(t, f), "").JSON(t)
	if st["available"] != 5.0 {
		t.Fatalf("stock %v: the cancelled unit is not back", st)
	}
	f.audited(t)
}

func admin(t *testing.T, f fixture) string {
	_, tok := f.User(t, "admin@example.com", "admin")
	return tok
}

// Bad bodies are refused with a clear code and record nothing: no
// signature, the wrong secret, a stale, future or truncated one, a signed body
// that is not a Stripe event, one over the size limit. An event of a
// type the shop does not apply is answered and ignored. None of it
// counts against the per-IP limit.
func TestWebhookRefusesBadBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *config.Config) { c.RateLimit = config.RateLimit{Limit: 2, Window: time.Minute} })
	order := uuid.NewString()
	good := event("evt_bad_1", "payment_intent.succeeded", intent("pi_bad", order, "succeeded", 300))
	sign := func(body []byte, key string, at time.Time) string {
		return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: key, Timestamp: at}).Header
	}
	huge := append(bytes.Clone(good[:len(good)-1]), []byte(`,"pad":"`+strings.Repeat("x", 70_000)+`"}`)...)
	for _, c := range []struct {
		name, header string
		body         []byte
		status       int
		code         string
	}{
		{"unsigned", "", good, 400, "invalid_signature"},
		{"garbage header", "nonsense", good, 400, "invalid_signature"},
		{"wrong secret", sign(good, "whsec_other", time.Now()), good, 400, "invalid_signature"},
		{"stale", sign(good, secret, time.Now().Add(-6*time.Minute)), good, 400, "invalid_signature"},
		{"six minutes ahead", sign(good, secret, time.Now().Add(6*time.Minute)), good, 400, "invalid_signature"},
		{"an hour ahead", sign(good, secret, time.Now().Add(time.Hour)), good, 400, "invalid_signature"},
		// Stripe's check reads the last t=, as the signature does.
		{"an hour ahead after a t of now", fmt.Sprintf("t=%d,", time.Now().Unix()) + sign(good, secret, time.Now().Add(time.Hour)),
			good, 400, "invalid_signature"},
		{"truncated", sign(good, secret, time.Now()), good[:len(good)/2], 400, "invalid_signature"},
		{"signed, not JSON", sign([]byte("not json"), secret, time.Now()), []byte("not json"), 400, "invalid_request"},
		{"signed, not an event", sign([]byte(`{"a":1}`), secret, time.Now()), []byte(`{"a":1}`), 400, "invalid_request"},
		{"signed, not an intent", sign(event("evt_x", "payment_intent.succeeded", map[string]any{"id": 7}), secret, time.Now()),
			event("evt_x", "payment_intent.succeeded", map[string]any{"id": 7}), 400, "invalid_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.Do(t, "POST", "/api/v1/payments/stripe/webhook", "", string(c.body), "Stripe-Signature", c.header)
			openapitest.WantProblem(t, r, c.status, c.code)
		})
	}
	// Over the size limit: refused before the handler (a listening
	// server's answer; the in-process test client refuses such a body).
	base := f.Serve(t)
	req, _ := http.NewRequest("POST", base+"/api/v1/payments/stripe/webhook", bytes.NewReader(huge))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", sign(huge, secret, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %d", resp.StatusCode)
	}
	other := event("evt_other", "customer.created", map[string]any{"id": "cus_1", "object": "customer"})
	shoptest.WantStatus(t, f.deliver(t, other, secret, time.Now()), http.StatusOK)
	// A clock a little ahead of ours is within the tolerance.
	shoptest.WantStatus(t, f.deliver(t, other, secret, time.Now().Add(3*time.Minute)), http.StatusOK)
	if n := f.count(t, `SELECT (SELECT count(*) FROM payment_events) + (SELECT count(*) FROM payments)`); n != 0 {
		t.Fatalf("%d rows recorded from bodies that were refused or ignored", n)
	}
	if n := f.stripe.refundsOf("pi_bad"); n != 0 {
		t.Fatalf("%d refunds", n)
	}
}

// Stripe out of reach mid-pay: 503, and the order stays payable; once
// Stripe answers again, the same pay goes through.
func TestStripeDownMidPay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Sale(t, "stripe-down", 300, 5, 0)
	id, tok := f.confirmedOrder(t, "stripe-down")
	f.stripe.down.Store(true)
	r := f.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"pm_card_visa"}`)
	openapitest.WantProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	if o := f.order(t, id, tok); o["status"] != "confirmed" || o["payment"] != nil {
		t.Fatalf("order after Stripe was down: %v", o)
	}
	f.stripe.down.Store(false)
	f.pay(t, id, tok)
	// stripe-go retried each call while Stripe was down, and the shopper
	// paid again: every attempt carried the one key, so Stripe makes one
	// intent of them.
	f.stripe.mu.Lock()
	keys := slices.Compact(slices.Clone(f.stripe.createKeys))
	f.stripe.mu.Unlock()
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "order:"+id+":") {
		t.Fatalf("intent creations keyed %v, want one key of the order", keys)
	}
	f.audited(t)
}

// An effect that failed leaves its event recorded and unapplied (as a
// crash between record and effect would): the next delivery applies it.
func TestUnappliedEventIsAppliedOnRedelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Sale(t, "stripe-crash", 300, 5, 0)
	id, tok := f.confirmedOrder(t, "stripe-crash")
	pi := f.pay(t, id, tok)
	body := event("evt_crash", "payment_intent.succeeded", intent(pi, id, "succeeded", 300))
	// Recorded, then the process died before the effect.
	if _, err := f.DB.Pool.Exec(context.Background(),
		`INSERT INTO payment_events (id, provider, type, payload) VALUES ('evt_crash', 'stripe', 'payment_intent.succeeded', $1)`,
		body); err != nil {
		t.Fatal(err)
	}
	if o := f.order(t, id, tok); o["status"] != "confirmed" {
		t.Fatalf("status %v", o["status"])
	}
	shoptest.WantStatus(t, f.deliver(t, body, secret, time.Now()), http.StatusOK)
	if o := f.order(t, id, tok); o["status"] != "paid" {
		t.Fatalf("after the redelivery: %v", o)
	}
	if n := f.count(t, `SELECT count(*) FROM payment_events WHERE applied_at IS NULL`); n != 0 {
		t.Fatal(fmt.Sprint(n, " events still unapplied"))
	}
	f.audited(t)
}

// stripeMockSucceeded is a stripe-mock whose intents succeed at once.
func stripeMockSucceeded(t testing.TB) string {
	return testenv.StripeMockWith(t, map[string]map[string]any{"payment_intent": {"status": "succeeded", "amount": 300}})
}

// A card that needs nothing more pays at once (200); its webhook, when it
// comes, changes nothing and refunds nothing.
func TestPaySucceedsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.stripe.point(t, stripeMockSucceeded(t))
	f.Sale(t, "stripe-now", 300, 5, 0)
	id, tok := f.confirmedOrder(t, "stripe-now")
	r := f.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"pm_card_visa"}`)
	shoptest.WantStatus(t, r, http.StatusOK)
	o := r.JSON(t)
	p := o["payment"].(map[string]any)
	if o["status"] != "paid" || p["status"] != "succeeded" || p["client_secret"] != nil {
		t.Fatalf("paid order %s", r.Body)
	}
	pi := p["id"].(string)
	shoptest.WantStatus(t, f.deliver(t, event("evt_now", "payment_intent.succeeded", intent(pi, id, "succeeded", 300)), secret, time.Now()), http.StatusOK)
	if o := f.order(t, id, tok); o["status"] != "paid" || o["payment"].(map[string]any)["status"] != "succeeded" {
		t.Fatalf("after its webhook: %v", o)
	}
	if n := f.stripe.refundsOf(pi); n != 0 {
		t.Fatalf("%d refunds", n)
	}
	f.audited(t)
}

// reconcile runs `shop payments reconcile` over the app's stores against
// whatever Stripe the proxy points at; it returns its lines.
func (f fixture) reconcile(t *testing.T) ([]string, error) {
	t.Helper()
	var out bytes.Buffer
	err := payment.Reconcile(context.Background(), shop.Stripe(f.Config), f.Webhook, f.Orders,
		time.Now().Add(-24*time.Hour), &out)
	return strings.FieldsFunc(out.String(), func(r rune) bool { return r == '\n' }), err
}

// withSucceededIntent points the proxy at a Stripe whose list holds one
// succeeded intent of order id, of cents; it returns the intent's id.
func (f fixture) withSucceededIntent(t *testing.T, id string, cents int64) string {
	t.Helper()
	const pi = "pi_lost_webhook"
	f.stripe.point(t, testenv.StripeMockWith(t, map[string]map[string]any{"payment_intent": {
		"id": pi, "status": "succeeded", "amount": cents, "metadata": map[string]string{"order_id": id}}}))
	return pi
}

// A webhook that never came: reconcile pays the order from Stripe's own
// list, once; run again, it finds nothing to do.
func TestReconcilePaysWhatAWebhookLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Sale(t, "stripe-lost", 300, 5, 0)
	id, tok := f.confirmedOrder(t, "stripe-lost")
	f.pay(t, id, tok) // 202: the webhook that would finish it is lost
	pi := f.withSucceededIntent(t, id, 300)
	lines, err := f.reconcile(t)
	if err != nil || len(lines) != 1 || !strings.Contains(lines[0], pi) || !strings.Contains(lines[0], "paid now") {
		t.Fatalf("reconcile: %q %v", lines, err)
	}
	if o := f.order(t, id, tok); o["status"] != "paid" || o["payment"].(map[string]any)["id"] != pi {
		t.Fatalf("order after reconcile: %v", o)
	}
	if lines, err := f.reconcile(t); err != nil || len(lines) != 0 {
		t.Fatalf("reconcile again: %q %v, want nothing to do", lines, err)
	}
	f.audited(t)
}

// A lost success of an order cancelled meanwhile is refunded; when the
// refund fails, reconcile says so and fails, and the next run makes it.
// A recorded event never applied (a crash) is applied first.
func TestReconcileRefundsAndApplies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Sale(t, "stripe-gone", 300, 5, 0)
	id, tok := f.confirmedOrder(t, "stripe-gone")
	crashed, ctok := f.confirmedOrder(t, "stripe-gone")
	crashedPI := f.pay(t, crashed, ctok)
	body := event("evt_crashed", "payment_intent.payment_failed", intent(crashedPI, crashed, "requires_payment_method", 300))
	if _, err := f.DB.Pool.Exec(context.Background(), `INSERT INTO payment_events (id, provider, type, payload, received_at)
		VALUES ('evt_crashed', 'stripe', 'payment_intent.payment_failed', $1, now() - interval '2 minutes')`, body); err != nil {
		t.Fatal(err)
	}
	shoptest.WantStatus(t, f.Do(t, "POST", "/api/v1/orders/"+id+"/cancel", tok, ""), http.StatusOK)
	pi := f.withSucceededIntent(t, id, 300)

	f.stripe.refundsDown.Store(true)
	lines, err := f.reconcile(t)
	if err == nil || len(lines) != 2 || !strings.Contains(lines[0], "applied 1") || !strings.Contains(lines[1], "could not repair") {
		t.Fatalf("reconcile with refunds failing: %q %v, want the event applied and the refund failed", lines, err)
	}
	if p := f.order(t, crashed, ctok)["payment"].(map[string]any); p["status"] != "failed" {
		t.Fatalf("the crashed event's payment: %v", p)
	}
	f.stripe.refundsDown.Store(false)
	lines, err = f.reconcile(t)
	if err != nil || len(lines) != 1 || !strings.Contains(lines[0], "refunded") {
		t.Fatalf("reconcile: %q %v", lines, err)
	}
	o := f.order(t, id, tok)
	if p := o["payment"].(map[string]any); o["status"] != "cancelled" || p["status"] != "refunded" || p["refunded_cents"] != 300.0 {
		t.Fatalf("cancelled order after reconcile: %v", o)
	}
	if n := f.stripe.refundsOf(pi); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
	if lines, err := f.reconcile(t); err != nil || len(lines) != 0 {
		t.Fatalf("reconcile again: %q %v", lines, err)
	}
	f.audited(t)
}

// Many events at once, more than the pool has connections: each is
// applied, none waits on another (a delivery holds no connection while
// its effect takes its own).
func TestManyEventsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Sale(t, "stripe-many", 300, 5, 0)
	id, _ := f.confirmedOrder(t, "stripe-many")
	n := 4 * int(f.DB.Pool.Config().MaxConns)
	var ops []func()
	for i := range n {
		body := event(fmt.Sprintf("evt_many_%d", i), "payment_intent.payment_failed",
			intent(fmt.Sprintf("pi_many_%d", i), id, "requires_payment_method", 300))
		ops = append(ops, func() {
			if r := f.deliver(t, body, secret, time.Now()); r.Status != http.StatusOK {
				t.Errorf("delivery %d: %d %s", i, r.Status, r.Body)
			}
		})
	}
	ordertesting.Together(ops...)
	if got := f.count(t, `SELECT count(*) FROM payment_events WHERE applied_at IS NOT NULL`); got != int64(n) {
		t.Fatalf("%d of %d events applied", got, n)
	}
	f.audited(t)
}

// An admin's refund of an order paid through Stripe is one Refund of its
// PaymentIntent: Stripe erring answers 503 with the order refunded (its
// unit back) and its payment not yet; the next refund finishes it, and a
// repeat asks Stripe nothing more.
func TestAdminRefundThroughStripe(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.stripe.point(t, stripeMockSucceeded(t))
	f.Sale(t, "stripe-refund", 300, 5, 0)
	id, tok := f.confirmedOrder(t, "stripe-refund")
	r := f.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"pm_card_visa"}`)
	shoptest.WantStatus(t, r, http.StatusOK)
	pi := r.JSON(t)["payment"].(map[string]any)["id"].(string)
	adm := admin(t, f)
	refund := func() openapitest.Reply { return f.Do(t, "POST", "/api/v1/admin/orders/"+id+"/refund", adm, "") }

	f.stripe.refundsDown.Store(true)
	shoptest.WantStatus(t, refund(), http.StatusServiceUnavailable)
	if o := f.order(t, id, tok); o["status"] != "refunded" || o["payment"].(map[string]any)["status"] != "succeeded" {
		t.Fatalf("after Stripe erred: %v, want refunded with the payment not yet", o)
	}
	f.stripe.refundsDown.Store(false)
	for range 2 {
		r := refund()
		shoptest.WantStatus(t, r, http.StatusOK)
		p := r.JSON(t)["payment"].(map[string]any)
		if r.JSON(t)["status"] != "refunded" || p["status"] != "refunded" || p["refunded_cents"] != 300.0 || p["id"] != pi {
			t.Fatalf("refund: %s", r.Body)
		}
	}
	if n := f.stripe.refundsOf(pi); n != 1 {
		t.Fatalf("%d refunds asked of Stripe, want 1", n)
	}
	st := f.Do(t, "GET", "/api/v1/admin/products/stripe-refund/stock", adm, "").JSON(t)
	if st["available"] != 5.0 || st["released"] != 1.0 {
		t.Fatalf("stock %v: the refunded unit is not back once", st)
	}
	f.audited(t)
}
