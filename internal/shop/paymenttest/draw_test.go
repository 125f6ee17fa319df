package paymenttest

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

// hold is a draw entry's intent as Stripe sends it.
func hold(pi, entryID, status string) map[string]any {
	return map[string]any{"id": pi, "object": "payment_intent", "status": status, "amount": 300,
		"currency": "usd", "capture_method": "manual", "metadata": map[string]string{"draw_entry_id": entryID}}
}

// drawEntry opens a draw on sku (once) and enters a new shopper: stripe-mock's
// intent needs more, so the entry is authorizing; it returns the entry's
// id, its intent's and the shopper's token.
func (f fixture) drawEntry(t *testing.T, sku string) (entry, pi, token string) {
	t.Helper()
	_, token = f.Shopper(t, uuid.NewString()+"@example.com")
	r := f.Do(t, "POST", "/api/v1/products/"+sku+"/draw/entries", token, `{"quantity":1,"payment_token":"pm_card_visa"}`)
	shoptest.WantStatus(t, r, http.StatusAccepted)
	e := r.JSON(t)
	if e["state"] != "authorizing" {
		t.Fatalf("entry %s", r.Body)
	}
	return e["entry_id"].(string), e["payment"].(map[string]any)["id"].(string), token
}

func (f fixture) openDraw(t *testing.T, sku string, units int) {
	t.Helper()
	f.Product(t, sku, 300)
	closes := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r := f.Do(t, "PUT", "/api/v1/admin/products/"+sku+"/stock", admin(t, f),
		`{"quantity":`+itoa(units)+`,"draw":{"closes_at":"`+closes+`"}}`)
	shoptest.WantStatus(t, r, http.StatusOK)
}

func itoa(n int) string { return strconv.Itoa(n) }

func (f fixture) entryState(t *testing.T, sku, token string) string {
	t.Helper()
	r := f.Do(t, "GET", "/api/v1/products/"+sku+"/draw/entries/me", token, "")
	shoptest.WantStatus(t, r, http.StatusOK)
	return r.JSON(t)["state"].(string)
}

// A signed amount_capturable_updated of an authorizing entry's intent
// enters it (once, whatever the deliveries); a succeeded one of an entry
// not won is recorded for the audit, the entry left as it is.
func TestDrawEntryWebhooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.openDraw(t, "stripe-draw", 1)
	entry, pi, tok := f.drawEntry(t, "stripe-draw")
	for range 2 {
		r := f.deliver(t, event("evt_held", "payment_intent.amount_capturable_updated", hold(pi, entry, "requires_capture")), secret, time.Now())
		shoptest.WantStatus(t, r, http.StatusOK)
	}
	if s := f.entryState(t, "stripe-draw", tok); s != "entered" {
		t.Fatalf("entry %s after its hold's webhook, want entered", s)
	}
	r := f.deliver(t, event("evt_taken", "payment_intent.succeeded", hold(pi, entry, "succeeded")), secret, time.Now())
	shoptest.WantStatus(t, r, http.StatusOK)
	if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE payment_mismatch = 'succeeded_not_won' AND state = 'entered'`); n != 1 {
		t.Fatalf("%d mismatches recorded, want 1", n)
	}
}

// A hold whose webhook never came: reconcile lists it from Stripe and
// enters the authorizing entry; run again, it has nothing to do.
func TestReconcileEntersAnEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.openDraw(t, "stripe-draw-lost", 1)
	entry, pi, tok := f.drawEntry(t, "stripe-draw-lost")
	f.stripe.point(t, testenv.StripeMockWith(t, map[string]map[string]any{"payment_intent": {
		"id": pi, "status": "requires_capture", "amount": 300, "capture_method": "manual",
		"metadata": map[string]string{"draw_entry_id": entry}}}))
	lines, err := f.reconcile(t)
	if err != nil || len(lines) != 1 || !strings.Contains(lines[0], entry) || !strings.HasSuffix(lines[0], "entered") {
		t.Fatalf("reconcile: %q %v", lines, err)
	}
	if s := f.entryState(t, "stripe-draw-lost", tok); s != "entered" {
		t.Fatalf("entry %s after reconcile, want entered", s)
	}
	if lines, err := f.reconcile(t); err != nil || len(lines) != 0 {
		t.Fatalf("reconcile again: %q %v", lines, err)
	}
}
