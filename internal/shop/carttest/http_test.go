package carttest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/cart"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// httpFixture is the whole application, wired as shop serve wires it.
type httpFixture struct{ *shoptest.App }

func newHTTPFixture(t testing.TB) httpFixture {
	t.Helper()
	return httpFixture{shoptest.New(t, shoptest.Options{})}
}

func (h httpFixture) sale(t testing.TB, sku string, price int64, quantity, limit int) {
	t.Helper()
	h.Sale(t, sku, price, quantity, limit)
}

func (h httpFixture) product(t testing.TB, sku string, price int64) {
	t.Helper()
	h.Product(t, sku, price)
}

func (h httpFixture) shopper(t testing.TB, email string) (string, string) {
	t.Helper()
	return h.Shopper(t, email)
}

// hash is the shopper's cart as Redis holds it.
func (h httpFixture) hash(t testing.TB, user string) map[string]string {
	t.Helper()
	m, err := h.Redis.Client.HGetAll(context.Background(), h.Config.KeyPrefix+"cart:{"+user+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (h httpFixture) streamLen(t testing.TB) int64 {
	t.Helper()
	return h.Redis.Client.XLen(context.Background(), h.Config.KeyPrefix+"orders").Val()
}

// cartOf is the cart a 200 answer carries.
func cartOf(t *testing.T, r openapitest.Reply) cart.Cart {
	t.Helper()
	var c cart.Cart
	r.Decode(t, http.StatusOK, &c)
	return c
}

// The whole cart API for one shopper; another shopper sees none of it.
func TestCartOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "mug", 1250, 10, 0)
	h.sale(t, "tea", 399, 10, 0)
	annID, ann := h.shopper(t, "ann@example.com")
	_, bob := h.shopper(t, "bob@example.com")

	if r := h.Do(t, "GET", "/api/v1/cart", ann, ""); string(r.Body) != `{"items":[],"total_cents":0}` {
		t.Fatalf("empty cart = %d %s", r.Status, r.Body)
	}
	cartOf(t, h.Do(t, "POST", "/api/v1/cart/items", ann, `{"sku":"tea","quantity":1}`))
	r := h.Do(t, "POST", "/api/v1/cart/items", ann, `{"sku":"mug","quantity":2}`)
	want := `{"items":[{"sku":"mug","name":"Product mug","price_cents":1250,"quantity":2,"line_total_cents":2500},` +
		`{"sku":"tea","name":"Product tea","price_cents":399,"quantity":1,"line_total_cents":399}],"total_cents":2899}`
	if string(r.Body) != want {
		t.Fatalf("cart = %s\nwant %s", r.Body, want)
	}
	if c := cartOf(t, h.Do(t, "PUT", "/api/v1/cart/items/tea", ann, `{"quantity":3}`)); c.TotalCents != 2500+3*399 {
		t.Fatalf("after PUT: %+v", c)
	}
	if c := cartOf(t, h.Do(t, "GET", "/api/v1/cart", bob, "")); len(c.Items) != 0 {
		t.Fatalf("bob sees %+v", c)
	}
	cartOf(t, h.Do(t, "DELETE", "/api/v1/cart/items/tea", bob, ""))
	openapitest.WantProblem(t, h.Do(t, "POST", "/api/v1/cart/checkout", bob, ""), 409, "cart_empty")
	if c := cartOf(t, h.Do(t, "DELETE", "/api/v1/cart/items/nothing-here", ann, "")); len(c.Items) != 2 {
		t.Fatalf("removing an absent line: %+v", c)
	}
	if c := cartOf(t, h.Do(t, "DELETE", "/api/v1/cart/items/tea", ann, "")); len(c.Items) != 1 || c.TotalCents != 2500 {
		t.Fatalf("after DELETE tea: %+v", c)
	}

	r = h.Do(t, "POST", "/api/v1/cart/checkout", ann, "", "Idempotency-Key", "pay-1")
	var placed order.Placed
	if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &placed) != nil || placed.Status != "pending" {
		t.Fatalf("checkout = %d %s", r.Status, r.Body)
	}
	if again := h.Do(t, "POST", "/api/v1/cart/checkout", ann, "", "Idempotency-Key", "pay-1"); again.Status != 202 ||
		!bytes.Equal(again.Body, r.Body) {
		t.Fatalf("repeat = %d %s, want %s", again.Status, again.Body, r.Body)
	}
	if c := cartOf(t, h.Do(t, "GET", "/api/v1/cart", ann, "")); len(c.Items) != 0 {
		t.Fatalf("cart after checkout: %+v", c)
	}
	cartOf(t, h.Do(t, "POST", "/api/v1/cart/items", ann, `{"sku":"mug","quantity":1}`))
	if r := h.Do(t, "DELETE", "/api/v1/cart", ann, ""); r.Status != http.StatusNoContent || len(h.hash(t, annID)) != 0 {
		t.Fatalf("clear = %d %s", r.Status, r.Body)
	}
	if c := cartOf(t, h.Do(t, "GET", "/api/v1/cart", ann, "")); len(c.Items) != 0 {
		t.Fatalf("cart after clear: %+v", c)
	}
}

// A refused checkout over HTTP names the SKUs and keeps the cart.
func TestCheckoutRefusalOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "short", 100, 1, 0)
	h.sale(t, "plenty", 100, 10, 0)
	_, tok := h.shopper(t, "cy@example.com")
	cartOf(t, h.Do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"plenty","quantity":1}`))
	before := cartOf(t, h.Do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"short","quantity":2}`))
	r := h.Do(t, "POST", "/api/v1/cart/checkout", tok, "")
	openapitest.WantProblem(t, r, 409, "out_of_stock")
	if !bytes.Contains(r.Body, []byte(`"skus":["short"]`)) {
		t.Fatalf("refusal does not name the sku: %s", r.Body)
	}
	if after := cartOf(t, h.Do(t, "GET", "/api/v1/cart", tok, "")); after.TotalCents != before.TotalCents || len(after.Items) != 2 {
		t.Fatalf("cart after a refusal: %+v, was %+v", after, before)
	}
}

// Bad input gets a clear problem and changes nothing.
func TestCartBadInputOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.product(t, "p", 100)
	uid, tok := h.shopper(t, "dee@example.com")
	cartOf(t, h.Do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":2}`))
	tests := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"add_unknown_sku", "POST", "/api/v1/cart/items", tok, `{"sku":"nope","quantity":1}`, 404, "not_found"},
		{"add_malformed_sku", "POST", "/api/v1/cart/items", tok, `{"sku":"no pe!","quantity":1}`, 400, "invalid_request"},
		{"add_no_sku", "POST", "/api/v1/cart/items", tok, `{"quantity":1}`, 400, "invalid_request"},
		{"add_sku_number", "POST", "/api/v1/cart/items", tok, `{"sku":7,"quantity":1}`, 400, "invalid_request"},
		{"add_no_quantity", "POST", "/api/v1/cart/items", tok, `{"sku":"p"}`, 400, "invalid_request"},
		{"add_zero", "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":0}`, 400, "invalid_request"},
		{"add_negative", "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":-1}`, 400, "invalid_request"},
		{"add_too_many", "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":10001}`, 400, "invalid_request"},
		{"add_line_over_max", "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":9999}`, 400, "invalid_request"},
		{"add_huge", "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":1e30}`, 400, "invalid_request"},
		{"add_fraction", "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":1.5}`, 400, "invalid_request"},
		{"add_string_quantity", "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":"1"}`, 400, "invalid_request"},
		{"add_not_object", "POST", "/api/v1/cart/items", tok, `[{"sku":"p"}]`, 400, "invalid_request"},
		{"add_malformed_json", "POST", "/api/v1/cart/items", tok, `{"sku":`, 400, "invalid_request"},
		{"add_empty_body", "POST", "/api/v1/cart/items", tok, ``, 400, "invalid_request"},
		{"set_negative", "PUT", "/api/v1/cart/items/p", tok, `{"quantity":-1}`, 400, "invalid_request"},
		{"set_too_many", "PUT", "/api/v1/cart/items/p", tok, `{"quantity":10001}`, 400, "invalid_request"},
		{"set_no_quantity", "PUT", "/api/v1/cart/items/p", tok, `{}`, 400, "invalid_request"},
		{"set_null_quantity", "PUT", "/api/v1/cart/items/p", tok, `{"quantity":null}`, 400, "invalid_request"},
		{"set_unknown_sku", "PUT", "/api/v1/cart/items/nope", tok, `{"quantity":1}`, 404, "not_found"},
		{"set_malformed_sku", "PUT", "/api/v1/cart/items/bad%20sku!", tok, `{"quantity":1}`, 404, "not_found"},
		{"remove_malformed_sku", "DELETE", "/api/v1/cart/items/bad%20sku!", tok, ``, 404, "not_found"},
		{"checkout_bad_key", "POST", "/api/v1/cart/checkout", tok, ``, 400, "invalid_request"},
		{"no_token", "GET", "/api/v1/cart", "", ``, 401, "unauthorized"},
		{"bad_token", "POST", "/api/v1/cart/items", "x.y.z", `{"sku":"p","quantity":1}`, 401, "unauthorized"},
		{"no_token_checkout", "POST", "/api/v1/cart/checkout", "", ``, 401, "unauthorized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.name == "checkout_bad_key" {
				headers = []string{"Idempotency-Key", strings.Repeat("k", 256)}
			}
			openapitest.WantProblem(t, h.Do(t, tc.method, tc.path, tc.token, tc.body, headers...), tc.status, tc.code)
		})
	}
	if c := h.hash(t, uid); len(c) != 1 || c["p"] != "2" {
		t.Fatalf("bad input changed the cart: %v", c)
	}
	if h.streamLen(t) != 0 {
		t.Fatal("bad input placed an order")
	}
}

// An Idempotency-Key a buy-now used cannot check a cart out: 422, and the
// cart and the stock are as they were (the defect: the first order came
// back, nothing was bought, and the cart stayed full behind a 202).
func TestCheckoutWithAnotherRequestsKey(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "mug", 100, 10, 0)
	uid, tok := h.shopper(t, "kay@example.com")
	if r := h.Do(t, "POST", "/api/v1/products/mug/purchase", tok, `{"quantity":1}`, "Idempotency-Key", "k-1"); r.Status != 202 {
		t.Fatalf("purchase: %d %s", r.Status, r.Body)
	}
	openapitest.WantProblem(t, h.Do(t, "POST", "/api/v1/products/mug/purchase", tok, `{"quantity":2}`, "Idempotency-Key", "k-1"),
		422, "idempotency_key_reused")
	cartOf(t, h.Do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"mug","quantity":2}`))
	openapitest.WantProblem(t, h.Do(t, "POST", "/api/v1/cart/checkout", tok, "", "Idempotency-Key", "k-1"), 422, "idempotency_key_reused")
	if c := h.hash(t, uid); c["mug"] != "2" || h.streamLen(t) != 1 {
		t.Fatalf("cart %v, orders %d: a reused key changed something", c, h.streamLen(t))
	}
	// Emptied cart, key of a buy-now: still refused, not the buy-now's order.
	h.Do(t, "DELETE", "/api/v1/cart", tok, "")
	openapitest.WantProblem(t, h.Do(t, "POST", "/api/v1/cart/checkout", tok, "", "Idempotency-Key", "k-1"), 422, "idempotency_key_reused")
}

// A Redis error that is no outage (here a cart key of the wrong type, as a
// bug would leave it) is a logged 500, never passed off as a 503. (Sent
// past the OpenAPI check: openapi.yaml documents no 500s.)
func TestCartBugIsNotAnOutage(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	user, token := h.shopper(t, "bug@example.com")
	if err := h.Redis.Client.Set(context.Background(), h.Config.KeyPrefix+"cart:{"+user+"}", "not a hash", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/cart", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.Fiber.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
}

// A path that names no line can never empty the cart: "." and ".." are not
// skus (as dot-segments they are resolved away by clients, so such a line
// could never be addressed), and DELETE /cart/ — what a client sends for
// DELETE /cart/items/.. after resolving it — is not DELETE /cart.
func TestDotPathsNeverClearTheCart(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.product(t, "p", 100)
	uid, tok := h.shopper(t, "dots@example.com")
	cartOf(t, h.Do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":2}`))
	tests := []struct{ name, method, path, body string }{
		{"delete_dotdot", "DELETE", "/api/v1/cart/items/..", ""},
		{"delete_dot", "DELETE", "/api/v1/cart/items/.", ""},
		{"delete_encoded_dotdot", "DELETE", "/api/v1/cart/items/%2e%2e", ""},
		{"delete_encoded_upper", "DELETE", "/api/v1/cart/items/%2E%2E", ""},
		{"delete_encoded_dot", "DELETE", "/api/v1/cart/items/%2e", ""},
		{"delete_dot_sku_path", "DELETE", "/api/v1/cart/items/.hidden", ""},
		{"delete_resolved_dotdot", "DELETE", "/api/v1/cart/", ""},
		{"delete_resolved_dot", "DELETE", "/api/v1/cart/items/", ""},
		{"set_dotdot", "PUT", "/api/v1/cart/items/..", `{"quantity":0}`},
		{"set_dot", "PUT", "/api/v1/cart/items/.", `{"quantity":5}`},
		{"add_dotdot", "POST", "/api/v1/cart/items", `{"sku":"..","quantity":1}`},
		{"add_dot", "POST", "/api/v1/cart/items", `{"sku":".","quantity":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cartOf(t, h.Do(t, "PUT", "/api/v1/cart/items/p", tok, `{"quantity":2}`))
			r := h.Do(t, tc.method, tc.path, tok, tc.body)
			if r.Status != http.StatusNotFound && r.Status != http.StatusBadRequest && r.Status != http.StatusMethodNotAllowed {
				t.Errorf("%s %s = %d %s, want a 4xx naming no line", tc.method, tc.path, r.Status, r.Body)
			}
			if r.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, r.Header.Get("Content-Type"))
			}
			if c := h.hash(t, uid); len(c) != 1 || c["p"] != "2" {
				t.Fatalf("%s %s changed the cart: %v", tc.method, tc.path, c)
			}
		})
	}
}
