package e2e

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

type cartView struct {
	Items []struct {
		SKU            string `json:"sku"`
		Quantity       int    `json:"quantity"`
		PriceCents     int64  `json:"price_cents"`
		LineTotalCents int64  `json:"line_total_cents"`
	} `json:"items"`
	TotalCents int64 `json:"total_cents"`
}

type orderView struct {
	ID     string `json:"order_id"`
	Status string `json:"status"`
	Items  []struct {
		SKU        string `json:"sku"`
		Quantity   int    `json:"quantity"`
		PriceCents int64  `json:"price_cents"`
	} `json:"items"`
	TotalCents int64 `json:"total_cents"`
}

// TestCartFlow: an admin puts two products on sale; a shopper fills a
// cart, checks it out, and the order is confirmed with the cart's lines
// and total. A cart asking more than the stock is refused whole, naming
// the SKU, and stays as it was.
func TestCartFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, stderr, err := runShop(t, e, "user", "add", "--email", "admin@example.com", "--password", "correct horse", "--role", "admin"); err != nil {
		t.Fatalf("user add: %v %s", err, stderr)
	}
	s := startServer(t, e)
	api := s.URL + "/api/v1"
	admin := "Bearer " + login(t, api, "admin@example.com", "correct horse").AccessToken
	onSale(t, api, admin, "e2e-mug", 1250, 5)
	onSale(t, api, admin, "e2e-tea", 399, 5)
	creds := map[string]string{"email": "shopper@example.com", "password": "correct horse battery"}
	if r := call(t, http.MethodPost, api+"/auth/register", creds); r.Status != http.StatusCreated {
		t.Fatalf("register = %d %s", r.Status, r.Body)
	}
	shopper := "Bearer " + login(t, api, creds["email"], creds["password"]).AccessToken

	addToCart(t, api, shopper, "e2e-tea", 3)
	c := addToCart(t, api, shopper, "e2e-mug", 2)
	if len(c.Items) != 2 || c.Items[0].SKU != "e2e-mug" || c.TotalCents != 2*1250+3*399 {
		t.Fatalf("cart = %+v", c)
	}
	r := call(t, http.MethodPost, api+"/cart/checkout", nil, "Authorization", shopper, "Idempotency-Key", "e2e-pay-1")
	var placed orderView
	r.JSON(t, &placed)
	if r.Status != http.StatusAccepted || placed.Status != "pending" || placed.ID == "" {
		t.Fatalf("checkout = %d %s", r.Status, r.Body)
	}
	o := waitConfirmed(t, api, shopper, placed.ID)
	if len(o.Items) != 2 || o.Items[0].SKU != "e2e-mug" || o.Items[0].Quantity != 2 || o.Items[1].PriceCents != 399 ||
		o.TotalCents != 2*1250+3*399 {
		t.Fatalf("confirmed order = %+v", o)
	}
	if r := call(t, http.MethodGet, api+"/cart", nil, "Authorization", shopper); string(r.Body) != `{"items":[],"total_cents":0}` {
		t.Fatalf("cart after checkout = %s", r.Body)
	}

	addToCart(t, api, shopper, "e2e-mug", 1)
	before := addToCart(t, api, shopper, "e2e-tea", 3) // 2 teas are left
	r = call(t, http.MethodPost, api+"/cart/checkout", nil, "Authorization", shopper)
	if r.Status != http.StatusConflict || !bytes.Contains(r.Body, []byte(`"code":"out_of_stock"`)) ||
		!bytes.Contains(r.Body, []byte(`"skus":["e2e-tea"]`)) {
		t.Fatalf("short checkout = %d %s", r.Status, r.Body)
	}
	var after cartView
	call(t, http.MethodGet, api+"/cart", nil, "Authorization", shopper).JSON(t, &after)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("cart after a refused checkout = %+v, was %+v", after, before)
	}
	m := string(call(t, http.MethodGet, s.URL+"/metrics", nil).Body)
	if !strings.Contains(m, `shop_checkouts_total{outcome="accepted"} 1`) || !strings.Contains(m, `shop_checkouts_total{outcome="out_of_stock"} 1`) {
		t.Errorf("/metrics does not count checkouts by outcome")
	}
}

// onSale creates a product and seeds units of it, unlimited per user.
func onSale(t *testing.T, api, admin, sku string, price int64, units int) {
	t.Helper()
	p := map[string]any{"sku": sku, "name": "Product " + sku, "category": "e2e", "price_cents": price}
	if r := call(t, http.MethodPost, api+"/admin/products", p, "Authorization", admin); r.Status != http.StatusCreated {
		t.Fatalf("create %s = %d %s", sku, r.Status, r.Body)
	}
	seed := map[string]any{"quantity": units, "per_user_limit": 0}
	if r := call(t, http.MethodPut, api+"/admin/products/"+sku+"/stock", seed, "Authorization", admin); r.Status != http.StatusOK {
		t.Fatalf("seed %s = %d %s", sku, r.Status, r.Body)
	}
}

func addToCart(t *testing.T, api, token, sku string, qty int) cartView {
	t.Helper()
	r := call(t, http.MethodPost, api+"/cart/items", map[string]any{"sku": sku, "quantity": qty}, "Authorization", token)
	var c cartView
	r.JSON(t, &c)
	if r.Status != http.StatusOK {
		t.Fatalf("add %s = %d %s", sku, r.Status, r.Body)
	}
	return c
}

// waitConfirmed polls the order until the writer has persisted it.
func waitConfirmed(t *testing.T, api, token, id string) orderView {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var o orderView
		r := call(t, http.MethodGet, api+"/orders/"+id, nil, "Authorization", token)
		r.JSON(t, &o)
		if r.Status == http.StatusOK && o.Status == "confirmed" {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s not confirmed within 30s: %d %s", id, r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
