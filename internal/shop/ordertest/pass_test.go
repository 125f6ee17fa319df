package ordertest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/openapitest"
)

// A purchase of a round with a waiting room needs the buyer's pass in
// X-Queue-Pass (docs/api.md, "The pass").
func TestPurchaseNeedsThePass(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	round := h.RoomSale(t, "roomed", 100, 10, 0)
	ann, tok := h.shopper(t, "ann@example.com")
	bob, _ := h.shopper(t, "bob@example.com")
	pass, theirs := h.Admit(t, "roomed", ann, round), h.Admit(t, "roomed", bob, round)
	const path = "/api/v1/products/roomed/purchase"

	for _, header := range []string{"", " , ", theirs, strings.Repeat("p", 129), strings.Repeat("x,", 1500)} {
		var hs []string
		if header != "" {
			hs = []string{"X-Queue-Pass", header}
		}
		r := h.Do(t, "POST", path, tok, `{"quantity":2}`, hs...)
		openapitest.WantProblem(t, r, http.StatusForbidden, "pass_required")
		if s := r.JSON(t)["skus"]; len(s.([]any)) != 1 || s.([]any)[0] != "roomed" {
			t.Fatalf("skus %v, want [roomed]", s)
		}
	}
	if avail, _ := h.Stock.Available(context.Background(), "roomed"); avail[0] != 10 {
		t.Fatalf("available %d after refusals, want 10", avail[0])
	}

	first := h.Do(t, "POST", path, tok, `{"quantity":2}`, "X-Queue-Pass", " junk , "+pass, "Idempotency-Key", "k1")
	if first.Status != http.StatusAccepted {
		t.Fatalf("with the pass: %d %s", first.Status, first.Body)
	}
	// A repeat of the key is answered the first order, pass or not.
	again := h.Do(t, "POST", path, tok, `{"quantity":2}`, "Idempotency-Key", "k1")
	if again.Status != http.StatusAccepted || again.JSON(t)["order_id"] != first.JSON(t)["order_id"] {
		t.Fatalf("repeat: %d %s, want the first answer %s", again.Status, again.Body, first.Body)
	}
	if avail, _ := h.Stock.Available(context.Background(), "roomed"); avail[0] != 8 {
		t.Fatalf("available %d, want 8", avail[0])
	}
}
