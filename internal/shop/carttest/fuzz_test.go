// Package carttest holds internal/cart's tests through the whole application
// (shoptest), so cart's own tests build only cart and what it imports.
package carttest

import (
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/shop-oss/shop/internal/cart"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// FuzzCartChange sends arbitrary skus and bodies through the real app to
// POST /cart/items (add), PUT /cart/items/{sku} (set) and DELETE
// /cart/items/{sku} (drill 29): never a 5xx, every 4xx a problem document
// that leaves the cart exactly as it was, and the cart only ever holds
// known skus, 1 to cart.MaxQuantity units each, at most cart.MaxLines lines.
func FuzzCartChange(f *testing.F) {
	h := newHTTPFixture(f)
	h.product(f, "p1", 100)
	h.product(f, "p2", 250)
	uid, tok := h.shopper(f, "fuzz@example.com")
	known := map[string]bool{"p1": true, "p2": true}
	for _, s := range []struct {
		op        uint8
		sku, body string
	}{
		{0, "", `{"sku":"p1","quantity":2}`},
		{0, "", `{"sku":"p2","quantity":10000}`},
		{0, "", `{"sku":"p1","quantity":1e3}`},
		{0, "", `{"sku":"..","quantity":1}`},
		{0, "", `{"sku":"p1","quantity":-9223372036854775808}`},
		{0, "", `{"sku":["p1"],"quantity":1}`},
		{0, "", "{\"sku\":\"p1\x00\",\"quantity\":1}"},
		{0, "", `{"a[-1]":"x","a.18446744073704":1}`},
		{1, "p1", `{"quantity":0}`},
		{1, "p2", `{"quantity":10001}`},
		{1, "p1", `{"quantity":5}`},
		{1, "..", `{"quantity":0}`},
		{1, ".", `{"quantity":1}`},
		{1, "%2e%2e", `{"quantity":0}`},
		{1, "p1", `{"quantity":1.5}`},
		{1, "nope", `{"quantity":1}`},
		{2, "p1", ``},
		{2, "..", ``},
		{2, "\xff\xfe", ``},
	} {
		f.Add(s.op, s.sku, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, op uint8, sku string, body []byte) {
		before := h.hash(t, uid)
		method, path := http.MethodPost, "/api/v1/cart/items"
		switch op % 3 {
		case 1:
			method, path = http.MethodPut, path+"/"+url.PathEscape(sku)
		case 2:
			method, path, body = http.MethodDelete, path+"/"+url.PathEscape(sku), nil
		}
		if len(path) > shoptest.MaxFuzzPath {
			t.Skip()
		}
		r := openapitest.Do(t, h.Fiber, method, path, tok, string(body))
		openapitest.WantSound(t, r)
		after := h.hash(t, uid)
		if r.Status >= 400 && !maps.Equal(before, after) {
			t.Fatalf("%d changed the cart from %v to %v", r.Status, before, after)
		}
		if len(after) > cart.MaxLines {
			t.Fatalf("%d lines", len(after))
		}
		for s, q := range after {
			if n, err := strconv.Atoi(q); !known[s] || err != nil || n < 1 || n > cart.MaxQuantity {
				t.Fatalf("cart line %q = %q", s, q)
			}
		}
	})
}
