package draw_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// The draw routes through the whole application, each exchange checked
// against openapi.yaml: the stock PUT of a draw and its report, bad
// input, an entry's statuses, buying refused, the public answer, the
// admin's list and close.
func TestDrawRoutes(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	_, admin := a.User(t, "admin@draw.test", "admin")
	_, ann := a.Shopper(t, "ann@draw.test")
	_, bob := a.Shopper(t, "bob@draw.test")
	a.Product(t, "drop", 250)
	closes := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	for _, c := range []struct{ body, field string }{
		{`{"quantity":2,"draw":{}}`, "draw.closes_at"},
		{`{"quantity":2,"draw":{"closes_at":"2000-01-01T00:00:00Z"}}`, "draw.closes_at"},
		{`{"quantity":2,"waiting_room":{"admit_per_second":5},"draw":{"closes_at":"` + closes + `"}}`, "draw"},
		{`{"quantity":2,"buckets":4,"draw":{"closes_at":"` + closes + `"}}`, "buckets"},
	} {
		r := a.Do(t, http.MethodPut, "/api/v1/admin/products/drop/stock", admin, c.body)
		openapitest.WantInvalid(t, r, []string{c.field})
	}
	r := a.Do(t, http.MethodPut, "/api/v1/admin/products/drop/stock", admin,
		`{"quantity":2,"per_user_limit":2,"draw":{"closes_at":"`+closes+`"}}`)
	shoptest.WantStatus(t, r, http.StatusOK)
	if d, _ := r.JSON(t)["draw"].(map[string]any); d["state"] != "open" || d["closes_at"] != closes {
		t.Fatalf("stock report's draw %v", r.JSON(t)["draw"])
	}

	r = a.Do(t, http.MethodPost, "/api/v1/products/drop/purchase", ann, `{"quantity":1}`)
	openapitest.WantProblem(t, r, http.StatusConflict, apperr.CodeSaleNotActive)

	for _, c := range []struct{ body, field string }{
		{`{"quantity":1}`, "payment_token"},
		{`{"quantity":0,"payment_token":"tok_visa"}`, "quantity"},
		{`{"quantity":3,"payment_token":"tok_visa"}`, "quantity"},
		{`{"payment_token":""}`, "payment_token"},
	} {
		openapitest.WantInvalid(t, a.Do(t, http.MethodPost, "/api/v1/products/drop/draw/entries", ann, c.body), []string{c.field})
	}
	r = a.Do(t, http.MethodPost, "/api/v1/products/drop/draw/entries", ann, `{"payment_token":"tok_declined"}`)
	openapitest.WantProblem(t, r, http.StatusPaymentRequired, apperr.CodePaymentDeclined)
	r = a.Do(t, http.MethodPost, "/api/v1/products/drop/draw/entries", ann, `{"quantity":2,"payment_token":"tok_visa"}`,
		"Idempotency-Key", "e-1")
	shoptest.WantStatus(t, r, http.StatusCreated)
	id := r.JSON(t)["entry_id"]
	r = a.Do(t, http.MethodPost, "/api/v1/products/drop/draw/entries", ann, `{"quantity":2,"payment_token":"tok_visa"}`,
		"Idempotency-Key", "e-1")
	if shoptest.WantStatus(t, r, http.StatusOK); r.JSON(t)["entry_id"] != id {
		t.Fatalf("repeat answered %v, want %v", r.JSON(t)["entry_id"], id)
	}
	r = a.Do(t, http.MethodPost, "/api/v1/products/drop/draw/entries", ann, `{"quantity":1,"payment_token":"tok_visa"}`,
		"Idempotency-Key", "e-1")
	openapitest.WantProblem(t, r, http.StatusUnprocessableEntity, apperr.CodeIdempotencyReused)
	r = a.Do(t, http.MethodPost, "/api/v1/products/drop/draw/entries", ann, `{"payment_token":"tok_visa"}`)
	openapitest.WantProblem(t, r, http.StatusConflict, apperr.CodeAlreadyEntered)
	shoptest.WantStatus(t, a.Do(t, http.MethodGet, "/api/v1/products/drop/draw/entries/me", ann, ""), http.StatusOK)
	openapitest.WantProblem(t, a.Do(t, http.MethodGet, "/api/v1/products/drop/draw/entries/me", bob, ""),
		http.StatusNotFound, apperr.CodeNotFound)
	shoptest.WantStatus(t, a.Do(t, http.MethodPost, "/api/v1/products/drop/draw/entries", bob, `{"payment_token":"tok_visa"}`),
		http.StatusCreated)
	r = a.Do(t, http.MethodDelete, "/api/v1/products/drop/draw/entries/me", bob, "")
	if shoptest.WantStatus(t, r, http.StatusOK); r.JSON(t)["state"] != "withdrawn" {
		t.Fatalf("withdrawn %s", r.Body)
	}
	shoptest.WantStatus(t, a.Do(t, http.MethodGet, "/api/v1/products/drop/draw", "", ""), http.StatusOK)
	openapitest.WantProblem(t, a.Do(t, http.MethodGet, "/api/v1/products/nope/draw", "", ""), http.StatusNotFound, apperr.CodeNotFound)

	r = a.Do(t, http.MethodPost, "/api/v1/admin/products/drop/draw/close", admin, "")
	shoptest.WantStatus(t, r, http.StatusOK)
	if got := r.JSON(t); got["state"] != "drawn" || got["seed"] == nil || got["winners_sha256"] == nil {
		t.Fatalf("closed draw %s", r.Body)
	}
	openapitest.WantProblem(t, a.Do(t, http.MethodPost, "/api/v1/admin/products/drop/draw/close", admin, ""),
		http.StatusConflict, apperr.CodeConflict)
	r = a.Do(t, http.MethodGet, "/api/v1/products/drop/draw/entries/me", ann, "")
	if shoptest.WantStatus(t, r, http.StatusOK); r.JSON(t)["state"] != "won" || r.JSON(t)["order_id"] == nil {
		t.Fatalf("ann's entry after the draw %s", r.Body)
	}
	openapitest.WantProblem(t, a.Do(t, http.MethodDelete, "/api/v1/products/drop/draw/entries/me", ann, ""),
		http.StatusConflict, apperr.CodeDrawClosed)
	// The won entry is a paid order, persisted by the writer like any other.
	orderID, _ := r.JSON(t)["order_id"].(string)
	a.Drain(t)
	r = a.Do(t, http.MethodGet, "/api/v1/orders/"+orderID, ann, "")
	o := r.JSON(t)
	if shoptest.WantStatus(t, r, http.StatusOK); o["status"] != "paid" || o["total_cents"] != float64(500) {
		t.Fatalf("the won order %s", r.Body)
	}
	if p, _ := o["payment"].(map[string]any); p["status"] != "succeeded" || p["amount_cents"] != float64(500) {
		t.Fatalf("the won order's payment %v", o["payment"])
	}
	r = a.Do(t, http.MethodGet, "/api/v1/orders", ann, "")
	if items, _ := r.JSON(t)["items"].([]any); len(items) != 1 {
		t.Fatalf("ann's orders %s", r.Body)
	}
	r = a.Do(t, http.MethodGet, "/api/v1/admin/products/drop/draw/entries?limit=1", admin, "")
	if shoptest.WantStatus(t, r, http.StatusOK); r.JSON(t)["next_cursor"] == nil {
		t.Fatalf("admin list %s", r.Body)
	}
	openapitest.WantInvalid(t, a.Do(t, http.MethodGet, "/api/v1/admin/products/drop/draw/entries?cursor=x", admin, ""),
		[]string{"cursor"})
	r = a.Do(t, http.MethodGet, "/api/v1/admin/products/drop/stock", admin, "")
	if d, _ := r.JSON(t)["draw"].(map[string]any); d["state"] != "drawn" || d["winners"] != float64(1) || d["entries"] != float64(1) {
		t.Fatalf("stock report's draw after the draw %v", r.JSON(t)["draw"])
	}
	if rep := r.JSON(t); rep["available"] != float64(0) || rep["sold"] != float64(2) || rep["paid"] != float64(2) {
		t.Fatalf("stock report after the draw %s", r.Body)
	}
	r = a.Do(t, http.MethodGet, "/api/v1/admin/audit", admin, "")
	if shoptest.WantStatus(t, r, http.StatusOK); r.JSON(t)["ok"] != true {
		t.Fatalf("audit after the draw %s", r.Body)
	}
	r = a.Do(t, http.MethodGet, "/api/v1/best-sellers?period=all", "", "")
	if shoptest.WantStatus(t, r, http.StatusOK); !strings.Contains(string(r.Body), `"sku":"drop"`) ||
		!strings.Contains(string(r.Body), `"units":2`) {
		t.Fatalf("best sellers after the draw %s", r.Body)
	}
}
