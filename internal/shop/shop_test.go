package shop_test

import (
	"testing"

	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// The writer's after-commit hook, wired as shop serve and shop writer wire
// it, counts each persisted order's units on the best-seller boards once:
// a second drain (every entry delivered again would insert nothing) adds
// nothing.
func TestBestSellersFollowPersistedOrders(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	a.Sale(t, "mug", 100, 50, 0)
	a.Sale(t, "tea", 100, 50, 0)
	for i, buy := range []struct {
		sku string
		qty int
	}{{"mug", 3}, {"tea", 1}, {"mug", 2}} {
		_, tok := a.Shopper(t, "buyer"+string(rune('a'+i))+"@example.com")
		body := `{"quantity":` + string(rune('0'+buy.qty)) + `}`
		if r := a.Do(t, "POST", "/api/v1/products/"+buy.sku+"/purchase", tok, body); r.Status != 202 {
			t.Fatalf("purchase: %d %s", r.Status, r.Body)
		}
	}
	a.Drain(t)
	a.Drain(t)
	got := a.Do(t, "GET", "/api/v1/best-sellers?period=all", "", "").JSON(t)
	items, _ := got["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("best sellers = %v, want mug and tea", got)
	}
	first, second := items[0].(map[string]any), items[1].(map[string]any)
	if first["sku"] != "mug" || first["units"] != 5.0 || second["sku"] != "tea" || second["units"] != 1.0 {
		t.Fatalf("best sellers = %v, want mug 5, tea 1", items)
	}
}
