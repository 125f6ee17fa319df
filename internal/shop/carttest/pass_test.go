package carttest

import (
	"context"
	"net/http"
	"testing"

	"github.com/shop-oss/shop/internal/openapitest"
)

// A checkout of lines of rounds with waiting rooms needs a pass for each,
// comma-separated in X-Queue-Pass.
func TestCheckoutNeedsThePasses(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	ra, rb := h.RoomSale(t, "room-a", 100, 10, 0), h.RoomSale(t, "room-b", 200, 10, 0)
	h.sale(t, "open", 50, 10, 0)
	u, tok := h.shopper(t, "ann@example.com")
	pa, pb := h.Admit(t, "room-a", u, ra), h.Admit(t, "room-b", u, rb)
	for _, sku := range []string{"room-a", "room-b", "open"} {
		cartOf(t, h.Do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"`+sku+`","quantity":1}`))
	}

	openapitest.WantProblem(t, h.Do(t, "POST", "/api/v1/cart/checkout", tok, ""), http.StatusForbidden, "pass_required")
	r := h.Do(t, "POST", "/api/v1/cart/checkout", tok, "", "X-Queue-Pass", pb)
	openapitest.WantProblem(t, r, http.StatusForbidden, "pass_required")
	if s := r.JSON(t)["skus"].([]any); len(s) != 1 || s[0] != "room-a" {
		t.Fatalf("skus %v, want [room-a]", s)
	}
	if n := len(h.hash(t, u)); n != 3 || h.streamLen(t) != 0 {
		t.Fatalf("cart of %d lines, %d orders after refusals; want 3 and none", n, h.streamLen(t))
	}

	r = h.Do(t, "POST", "/api/v1/cart/checkout", tok, "", "X-Queue-Pass", pa+","+pb)
	if r.Status != http.StatusAccepted {
		t.Fatalf("with both passes: %d %s", r.Status, r.Body)
	}
	if avail, _ := h.Stock.Available(context.Background(), "room-a", "room-b", "open"); avail[0] != 9 || avail[1] != 9 || avail[2] != 9 {
		t.Fatalf("available %v, want [9 9 9]", avail)
	}
}
