package ordertest

import (
	"net/http"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

func (h httpFixture) buy(t *testing.T, tok, sku string) string {
	t.Helper()
	r := h.Do(t, "POST", "/api/v1/products/"+sku+"/purchase", tok, `{"quantity":1}`)
	shoptest.WantStatus(t, r, http.StatusAccepted)
	return r.JSON(t)["order_id"].(string)
}

func wantCode(t *testing.T, r openapitest.Reply, status int, code string) {
	t.Helper()
	if r.Status != status || r.JSON(t)["code"] != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

func TestPayAndCancelOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "life", 5, 0, 300)
	_, tok := h.shopper(t, "payer@example.com")
	_, other := h.shopper(t, "other@example.com")
	id := h.buy(t, tok, "life")

	r := h.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"tok_ok"}`)
	wantCode(t, r, http.StatusConflict, "order_pending")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("order_pending without Retry-After")
	}
	h.Drain(t)
	for _, body := range []string{`{}`, `{"payment_token":""}`, `{"payment_token":7}`, `[]`} {
		r := h.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, body)
		wantCode(t, r, http.StatusBadRequest, "invalid_request")
	}
	for _, body := range []string{`{"payment_token":"tok_ok"}`, `{}`} {
		r = h.Do(t, "POST", "/api/v1/orders/"+id+"/pay", other, body)
		wantCode(t, r, http.StatusNotFound, "not_found") // another user's order, whatever the body
	}
	r = h.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"tok_declined"}`)
	wantCode(t, r, http.StatusPaymentRequired, "payment_declined")

	paid := h.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"tok_ok"}`, "Idempotency-Key", "pay-1")
	shoptest.WantStatus(t, paid, http.StatusOK)
	if o := paid.JSON(t); o["status"] != "paid" || o["paid_at"] == nil || o["expires_at"] == nil {
		t.Fatalf("paid order: %v", o)
	}
	again := h.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"tok_ok"}`)
	if again.Status != http.StatusOK || again.JSON(t)["paid_at"] != paid.JSON(t)["paid_at"] {
		t.Fatalf("pay again: %d %s, want the same 200", again.Status, again.Body)
	}
	r = h.Do(t, "POST", "/api/v1/orders/"+id+"/cancel", tok, "")
	wantCode(t, r, http.StatusConflict, "order_not_cancellable")

	second := h.buy(t, tok, "life")
	for range 2 {
		r := h.Do(t, "POST", "/api/v1/orders/"+second+"/cancel", tok, "")
		if r.Status != http.StatusOK || r.JSON(t)["status"] != "cancelled" {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
	}
	r = h.Do(t, "POST", "/api/v1/orders/"+second+"/pay", tok, `{"payment_token":"tok_ok"}`)
	wantCode(t, r, http.StatusConflict, "order_not_payable")
	r = h.Do(t, "POST", "/api/v1/orders/"+second+"/cancel", other, "")
	wantCode(t, r, http.StatusNotFound, "not_found")
	r = h.Do(t, "POST", "/api/v1/orders/not-a-uuid/cancel", tok, "")
	wantCode(t, r, http.StatusNotFound, "not_found")

	h.Drain(t)
	admin := h.admin(t)
	st := h.Do(t, "GET", "/api/v1/admin/products/life/stock", admin, "").JSON(t)
	if st["available"] != 4.0 || st["released"] != 1.0 || st["paid"] != 1.0 || st["sold"] != 1.0 {
		t.Fatalf("stock report: %v", st)
	}
	list := h.Do(t, "GET", "/api/v1/orders", tok, "").JSON(t)["items"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["status"] != "cancelled" || list[1].(map[string]any)["status"] != "paid" {
		t.Fatalf("orders: %v", list)
	}
}

func (h httpFixture) admin(t *testing.T) string {
	t.Helper()
	_, tok := h.User(t, "admin@example.com", "admin")
	return tok
}

// An order not paid in time expires (the application's own sweeper): its
// unit is for sale again and leaves the best-seller board.
func TestUnpaidOrderExpiresOverHTTP(t *testing.T) {
	t.Parallel()
	h := httpFixture{shoptest.New(t, shoptest.Options{Config: func(c *config.Config) { c.PaymentTTL = 5 * time.Second }})} // room for the drain before it expires, on a loaded machine
	h.sale(t, "exp", 1, 1, 100)
	_, tok := h.shopper(t, "late@example.com")
	id := h.buy(t, tok, "exp")
	h.Drain(t)
	if r := h.Do(t, "GET", "/api/v1/best-sellers/exp?period=all", "", ""); r.Status != http.StatusOK {
		t.Fatalf("best seller before the expiry: %d %s", r.Status, r.Body)
	}

	deadline := time.Now().Add(20 * time.Second)
	for h.Do(t, "GET", "/api/v1/orders/"+id, tok, "").JSON(t)["status"] != "expired" {
		if time.Now().After(deadline) {
			t.Fatal("the order did not expire within 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := h.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"tok_ok"}`)
	wantCode(t, r, http.StatusConflict, "order_not_payable")
	r = h.Do(t, "POST", "/api/v1/orders/"+id+"/cancel", tok, "")
	wantCode(t, r, http.StatusConflict, "order_not_cancellable")
	// The unit and the buyer's limit came back: the same shopper buys again.
	h.buy(t, tok, "exp")
	h.Drain(t)
	var status string
	if err := h.DB.Pool.QueryRow(t.Context(), `SELECT status FROM order_transitions WHERE order_id = $1`, id).Scan(&status); err != nil || status != "expired" {
		t.Fatalf("recorded transition %q %v", status, err)
	}
	top := h.Do(t, "GET", "/api/v1/best-sellers/exp?period=all", "", "").JSON(t)
	if top["units"] != 1.0 {
		t.Fatalf("best seller after the expiry and a new sale: %v, want 1 unit", top)
	}
}
