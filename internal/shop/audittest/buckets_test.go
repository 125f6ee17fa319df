package audittest

import (
	"net/http"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// A round split over 4 stock buckets audits clean once sold out, with
// some orders cancelled and their units sold again: the audit's equation
// sums the buckets' available, and the stock report agrees.
func TestBucketedRoundAuditsClean(t *testing.T) {
	t.Parallel()
	const units = 12
	a := shoptest.New(t, shoptest.Options{})
	a.Product(t, "flash", 500)
	a.Round(t, "flash", inventory.Seed{Quantity: units, PerUserLimit: 2, Buckets: 4})
	stop := runWriter(t, a)
	defer stop()
	tokens := shoppers(t, a, 3*units)
	first := buyExactly(t, a, tokens[:2*units], units)
	cancelled := 0
	for tok, id := range first {
		if cancelled == units/3 {
			break
		}
		if r := a.Do(t, "POST", "/api/v1/orders/"+id+"/cancel", tok, ""); r.Status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		cancelled++
	}
	buyExactly(t, a, tokens[2*units:], units/3) // the units given back
	a.Drain(t)
	_, admin := a.User(t, "admin@example.com", "admin")
	if r := a.Do(t, "GET", "/api/v1/admin/audit", admin, ""); r.Status != http.StatusOK || r.JSON(t)["ok"] != true {
		t.Fatalf("audit: %d %s", r.Status, r.Body)
	}
	st := a.Do(t, "GET", "/api/v1/admin/products/flash/stock", admin, "").JSON(t)
	if st["available"] != 0.0 || st["released"] != float64(units/3) || st["buckets"] != 4.0 {
		t.Fatalf("stock report %v", st)
	}
}
