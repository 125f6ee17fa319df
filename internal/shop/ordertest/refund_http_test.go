package ordertest

import (
	"net/http"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// An admin's refund, step by step: each answer of POST
// /api/v1/admin/orders/{id}/refund and of what a refunded order allows
// after it, then where the refund shows (the order, the lists, the stock
// report, best sellers, PostgreSQL).
func TestRefundOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "ref", 5, 2, 300)
	_, tok := h.shopper(t, "refunded@example.com")
	admin := h.admin(t)
	paid, unpaid := h.buy(t, tok, "ref"), h.buy(t, tok, "ref")
	h.Drain(t)
	shoptest.WantStatus(t, h.Do(t, "POST", "/api/v1/orders/"+paid+"/pay", tok, `{"payment_token":"tok_ok"}`), http.StatusOK)
	refund := func(id string) string { return "/api/v1/admin/orders/" + id + "/refund" }

	var first map[string]any
	for _, tc := range []struct {
		name, path, token string
		headers           []string
		status            int
		code              string // of a problem; "" for an order answer
		orderStatus       string
	}{
		{"unknown", refund("0190f4e0-0000-7000-8000-000000000000"), admin, nil, 404, "not_found", ""},
		{"malformed_id", refund("not-a-uuid"), admin, nil, 404, "not_found", ""},
		{"braces_id", refund("{" + paid + "}"), admin, nil, 404, "not_found", ""},
		{"bad_idempotency_key", refund(paid), admin, []string{"Idempotency-Key", "a b"}, 400, "invalid_request", ""},
		{"not_paid", refund(unpaid), admin, nil, 409, "order_not_refundable", ""},
		{"paid", refund(paid), admin, []string{"Idempotency-Key", "refund-1"}, 200, "", "refunded"},
		{"again", refund(paid), admin, nil, 200, "", "refunded"},
		{"again_same_key", refund(paid), admin, []string{"Idempotency-Key", "refund-1"}, 200, "", "refunded"},
		{"then_pay", "/api/v1/orders/" + paid + "/pay", tok, nil, 409, "order_not_payable", ""},
		{"then_cancel", "/api/v1/orders/" + paid + "/cancel", tok, nil, 409, "order_not_cancellable", ""},
	} {
		body := ""
		if tc.name == "then_pay" {
			body = `{"payment_token":"tok_ok"}`
		}
		r := h.Do(t, "POST", tc.path, tc.token, body, tc.headers...)
		if tc.code != "" {
			wantCode(t, r, tc.status, tc.code)
			continue
		}
		shoptest.WantStatus(t, r, tc.status)
		o := r.JSON(t)
		if o["status"] != tc.orderStatus || o["paid_at"] == nil {
			t.Fatalf("%s: order %v, want %s and its paid_at", tc.name, o, tc.orderStatus)
		}
		if p, _ := o["payment"].(map[string]any); p["status"] != "refunded" || p["refunded_cents"] != 300.0 {
			t.Fatalf("%s: payment %v, want refunded in full", tc.name, o["payment"])
		}
		if first == nil {
			first = o
		} else if o["paid_at"] != first["paid_at"] || o["order_id"] != first["order_id"] {
			t.Fatalf("%s: %v, want the first answer %v", tc.name, o, first)
		}
	}
	h.wantRefundShows(t, tok, admin, paid)
}

// wantRefundShows checks where refunded order id shows: its own read, the
// buyer's list and the admin's filtered one (before and after the writer
// recorded it), the stock report (its unit released), best sellers (its
// unit taken back), and PostgreSQL's record.
func (h httpFixture) wantRefundShows(t *testing.T, tok, admin, id string) {
	t.Helper()
	for range 2 { // Redis's status, then PostgreSQL's too
		if st := h.Do(t, "GET", "/api/v1/orders/"+id, tok, "").JSON(t)["status"]; st != "refunded" {
			t.Fatalf("GET order: status %v", st)
		}
		list := h.Do(t, "GET", "/api/v1/orders", tok, "").JSON(t)["items"].([]any)
		if list[len(list)-1].(map[string]any)["status"] != "refunded" {
			t.Fatalf("orders: %v", list)
		}
		h.Drain(t)
	}
	// The admin list filters on PostgreSQL's record, which the writer made.
	items := h.Do(t, "GET", "/api/v1/admin/orders?status=refunded", admin, "").JSON(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["order_id"] != id {
		t.Fatalf("admin list of refunded orders: %v", items)
	}
	st := h.Do(t, "GET", "/api/v1/admin/products/ref/stock", admin, "").JSON(t)
	if st["available"] != 4.0 || st["released"] != 1.0 || st["paid"] != 0.0 {
		t.Fatalf("stock report: %v, want the refunded unit back (4 available, 1 released, none paid)", st)
	}
	if rep, err := h.Audit.Run(t.Context()); err != nil || !rep.OK {
		t.Fatalf("audit: %v %+v, want the refunded unit neither held nor missing", err, rep.Problems)
	}
	board := h.Do(t, "GET", "/api/v1/best-sellers/ref?period=all", "", "").JSON(t)
	if board["units"] != 1.0 {
		t.Fatalf("best seller: %v, want the unpaid order's unit only", board)
	}
	var status string
	var paidAt, refundedAt *time.Time
	err := h.DB.Pool.QueryRow(t.Context(), `SELECT status, at, refunded_at FROM order_transitions WHERE order_id = $1`, id).
		Scan(&status, &paidAt, &refundedAt)
	if err != nil || status != "refunded" || paidAt == nil || refundedAt == nil {
		t.Fatalf("recorded transition %q at %v refunded %v: %v", status, paidAt, refundedAt, err)
	}
}

// A paid order Redis no longer has (a week after it was placed) is
// refunded all the same: its status comes back from PostgreSQL first, so
// the refund takes the one guarded step, and a second refund nothing.
func TestRefundOfAnOrderRedisForgot(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "old", 1, 1, 100)
	_, tok := h.shopper(t, "old@example.com")
	admin := h.admin(t)
	id := h.buy(t, tok, "old")
	h.Drain(t)
	shoptest.WantStatus(t, h.Do(t, "POST", "/api/v1/orders/"+id+"/pay", tok, `{"payment_token":"tok_ok"}`), http.StatusOK)
	h.Drain(t)
	h.Redis.Client.Del(t.Context(), h.OrderKeys().StatusKey(id))
	for range 2 {
		r := h.Do(t, "POST", "/api/v1/admin/orders/"+id+"/refund", admin, "")
		shoptest.WantStatus(t, r, http.StatusOK)
		o := r.JSON(t)
		if p, _ := o["payment"].(map[string]any); o["status"] != "refunded" || o["paid_at"] == nil || p["status"] != "refunded" {
			t.Fatalf("refund of a forgotten order: %s", r.Body)
		}
	}
	st := h.Do(t, "GET", "/api/v1/admin/products/old/stock", admin, "").JSON(t)
	if st["available"] != 1.0 || st["released"] != 1.0 {
		t.Fatalf("stock report: %v, want the unit back once", st)
	}
	h.Drain(t)
	if rep, err := h.Audit.Run(t.Context()); err != nil || !rep.OK {
		t.Fatalf("audit: %v %+v", err, rep.Problems)
	}
}
