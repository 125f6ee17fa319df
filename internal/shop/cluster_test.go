package shop_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

// The HTTP API on a 3-master Redis Cluster (SHOP_REDIS_CLUSTER, 12
// partitions): a purchase and a checkout over SKUs on several masters are
// accepted (202) and read back as pending orders.
func TestPurchaseAndCheckoutOnACluster(t *testing.T) {
	t.Parallel()
	a := shoptest.OnCluster(t, testenv.StartCluster(t, 3), nil, nil)
	parts := a.Config.Partitions()
	if !parts.Grouped() || parts.Count() != 12 {
		t.Fatalf("partitions %+v", parts)
	}
	// Three SKUs in partitions on three masters (1, 5, 9 of 12).
	var skus []string
	for _, p := range []int{1, 5, 9} {
		for i := 0; ; i++ {
			if sku := fmt.Sprintf("c%d-%d", p, i); parts.Of(sku) == p {
				a.Sale(t, sku, 100, 10, 0)
				skus = append(skus, sku)
				break
			}
		}
	}
	_, tok := a.Shopper(t, "cluster@example.com")
	buy := a.Do(t, "POST", "/api/v1/products/"+skus[0]+"/purchase", tok, `{"quantity":2}`, "Idempotency-Key", "b1")
	if buy.Status != 202 {
		t.Fatalf("purchase: %d %s", buy.Status, buy.Body)
	}
	for _, sku := range skus {
		if r := a.Do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"`+sku+`","quantity":1}`); r.Status/100 != 2 {
			t.Fatalf("add %s to the cart: %d %s", sku, r.Status, r.Body)
		}
	}
	co := a.Do(t, "POST", "/api/v1/cart/checkout", tok, "", "Idempotency-Key", "c1")
	if co.Status != 202 {
		t.Fatalf("checkout: %d %s", co.Status, co.Body)
	}
	id, _ := co.JSON(t)["order_id"].(string)
	o := a.Do(t, "GET", "/api/v1/orders/"+id, tok, "").JSON(t)
	if items, _ := o["items"].([]any); o["status"] != "pending" || len(items) != 3 {
		t.Fatalf("the checkout's order: %v", o)
	}
	if cart := a.Do(t, "GET", "/api/v1/cart", tok, "").JSON(t); len(cart["items"].([]any)) != 0 {
		t.Fatalf("cart after checkout: %v", cart)
	}
	if again := a.Do(t, "POST", "/api/v1/cart/checkout", tok, "", "Idempotency-Key", "c1"); again.Status != 202 || again.JSON(t)["order_id"] != id {
		t.Fatalf("repeated checkout: %d %s", again.Status, again.Body)
	}
}

// A roomed sale over HTTP on the cluster: shoppers join, the app's own
// admitter admits them, and only a pass buys.
func TestWaitingRoomOnACluster(t *testing.T) {
	t.Parallel()
	a := shoptest.OnCluster(t, testenv.StartCluster(t, 3), nil, nil)
	a.Product(t, "room", 100)
	a.Round(t, "room", inventory.Seed{Quantity: 5, PerUserLimit: 1,
		Room: &inventory.RoomSettings{AdmitPerSecond: 20, PassTTL: time.Minute}})
	toks := make([]string, 3)
	for i := range toks {
		_, toks[i] = a.Shopper(t, fmt.Sprintf("room-%d@example.com", i))
		if r := a.Do(t, "POST", "/api/v1/products/room/queue", toks[i], ""); r.Status != 201 {
			t.Fatalf("join: %d %s", r.Status, r.Body)
		}
	}
	if r := a.Do(t, "POST", "/api/v1/products/room/purchase", toks[0], `{}`); r.Status != 403 || r.JSON(t)["code"] != "pass_required" {
		t.Fatalf("a purchase without a pass: %d %s", r.Status, r.Body)
	}
	for i, tok := range toks {
		var pass string
		for deadline := time.Now().Add(10 * time.Second); pass == ""; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("shopper %d was not admitted", i)
			}
			if p, ok := a.Do(t, "GET", "/api/v1/products/room/queue", tok, "").JSON(t)["pass"].(string); ok {
				pass = p
			}
		}
		if r := a.Do(t, "POST", "/api/v1/products/room/purchase", tok, `{}`, "X-Queue-Pass", pass); r.Status != 202 {
			t.Fatalf("shopper %d's purchase with the pass: %d %s", i, r.Status, r.Body)
		}
	}
}
