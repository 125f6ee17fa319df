package cart

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/apitest"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/server"
)

type httpFixture struct {
	*fixture
	app  *fiber.App
	auth *auth.Service
}

// newHTTPFixture serves the cart routes behind real auth.
func newHTTPFixture(t testing.TB) *httpFixture {
	t.Helper()
	f := newFixture(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := auth.New(f.db.Pool, f.r.Client, auth.Config{Secret: []byte("cart-tests-secret-0123456789abcdef"), KeyPrefix: f.r.Prefix}, log, f.reg)
	app := server.New(server.Deps{
		Log: log, Redis: f.r.Client, DB: f.db.Pool, Registry: f.reg, BodyLimit: 64 << 10,
		Mount: []func(fiber.Router){a.Routes, func(r fiber.Router) { f.svc.Routes(r, a.RequireUser()) }},
	})
	return &httpFixture{fixture: f, app: app, auth: a}
}

// shopper creates a user and returns its id and access token.
func (h *httpFixture) shopper(t testing.TB, email string) (string, string) {
	t.Helper()
	ctx := context.Background()
	u, err := h.auth.CreateUser(ctx, email, "correct horse battery", "", auth.RoleShopper)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.auth.Login(ctx, email, "correct horse battery", "test")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID, tok.AccessToken
}

type reply struct{ apitest.Reply }

func (r reply) cart(t *testing.T) Cart {
	t.Helper()
	var c Cart
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &c) != nil {
		t.Fatalf("want a cart, got %d %s", r.Status, r.Body)
	}
	return c
}

func (h *httpFixture) do(t *testing.T, method, path, token, body string, headers ...string) reply {
	t.Helper()
	return reply{apitest.Do(t, h.app, method, path, token, body, headers...)}
}

func wantProblem(t *testing.T, r reply, status int, code string) {
	t.Helper()
	apitest.WantProblem(t, r.Reply, status, code)
}

// The whole cart API for one shopper; another shopper sees none of it.
func TestCartOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "mug", 1250, 10, 0)
	h.sale(t, "tea", 399, 10, 0)
	annID, ann := h.shopper(t, "ann@example.com")
	_, bob := h.shopper(t, "bob@example.com")

	if r := h.do(t, "GET", "/api/v1/cart", ann, ""); string(r.Body) != `{"items":[],"total_cents":0}` {
		t.Fatalf("empty cart = %d %s", r.Status, r.Body)
	}
	h.do(t, "POST", "/api/v1/cart/items", ann, `{"sku":"tea","quantity":1}`).cart(t)
	r := h.do(t, "POST", "/api/v1/cart/items", ann, `{"sku":"mug","quantity":2}`)
	want := `{"items":[{"sku":"mug","name":"Product mug","price_cents":1250,"quantity":2,"line_total_cents":2500},` +
		`{"sku":"tea","name":"Product tea","price_cents":399,"quantity":1,"line_total_cents":399}],"total_cents":2899}`
	if string(r.Body) != want {
		t.Fatalf("cart = %s\nwant %s", r.Body, want)
	}
	if c := h.do(t, "PUT", "/api/v1/cart/items/tea", ann, `{"quantity":3}`).cart(t); c.TotalCents != 2500+3*399 {
		t.Fatalf("after PUT: %+v", c)
	}
	if c := h.do(t, "GET", "/api/v1/cart", bob, "").cart(t); len(c.Items) != 0 {
		t.Fatalf("bob sees %+v", c)
	}
	h.do(t, "DELETE", "/api/v1/cart/items/tea", bob, "").cart(t)
	wantProblem(t, h.do(t, "POST", "/api/v1/cart/checkout", bob, ""), 409, "cart_empty")
	if c := h.do(t, "DELETE", "/api/v1/cart/items/nothing-here", ann, "").cart(t); len(c.Items) != 2 {
		t.Fatalf("removing an absent line: %+v", c)
	}
	if c := h.do(t, "DELETE", "/api/v1/cart/items/tea", ann, "").cart(t); len(c.Items) != 1 || c.TotalCents != 2500 {
		t.Fatalf("after DELETE tea: %+v", c)
	}

	r = h.do(t, "POST", "/api/v1/cart/checkout", ann, "", "Idempotency-Key", "pay-1")
	var placed order.Placed
	if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &placed) != nil || placed.Status != "pending" {
		t.Fatalf("checkout = %d %s", r.Status, r.Body)
	}
	if again := h.do(t, "POST", "/api/v1/cart/checkout", ann, "", "Idempotency-Key", "pay-1"); again.Status != 202 ||
		!bytes.Equal(again.Body, r.Body) {
		t.Fatalf("repeat = %d %s, want %s", again.Status, again.Body, r.Body)
	}
	if c := h.do(t, "GET", "/api/v1/cart", ann, "").cart(t); len(c.Items) != 0 {
		t.Fatalf("cart after checkout: %+v", c)
	}
	h.do(t, "POST", "/api/v1/cart/items", ann, `{"sku":"mug","quantity":1}`).cart(t)
	if r := h.do(t, "DELETE", "/api/v1/cart", ann, ""); r.Status != http.StatusNoContent || len(h.hash(t, annID)) != 0 {
		t.Fatalf("clear = %d %s", r.Status, r.Body)
	}
	if c := h.do(t, "GET", "/api/v1/cart", ann, "").cart(t); len(c.Items) != 0 {
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
	h.do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"plenty","quantity":1}`).cart(t)
	before := h.do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"short","quantity":2}`).cart(t)
	r := h.do(t, "POST", "/api/v1/cart/checkout", tok, "")
	wantProblem(t, r, 409, "out_of_stock")
	if !bytes.Contains(r.Body, []byte(`"skus":["short"]`)) {
		t.Fatalf("refusal does not name the sku: %s", r.Body)
	}
	if after := h.do(t, "GET", "/api/v1/cart", tok, "").cart(t); after.TotalCents != before.TotalCents || len(after.Items) != 2 {
		t.Fatalf("cart after a refusal: %+v, was %+v", after, before)
	}
}

// Bad input gets a clear problem and changes nothing.
func TestCartBadInputOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.product(t, "p", 100)
	uid, tok := h.shopper(t, "dee@example.com")
	h.do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":2}`).cart(t)
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
			wantProblem(t, h.do(t, tc.method, tc.path, tc.token, tc.body, headers...), tc.status, tc.code)
		})
	}
	if c := h.hash(t, uid); len(c) != 1 || c["p"] != "2" {
		t.Fatalf("bad input changed the cart: %v", c)
	}
	if h.streamLen(t) != 0 {
		t.Fatal("bad input placed an order")
	}
}

// With Redis unreachable every cart route answers 503 with Retry-After,
// quickly: never a 500, a 401 or a hang.
func TestCartRedisDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.product(t, "p", 100) // in PostgreSQL, so the catalog can still answer
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	catalog := inventory.NewCatalog(f.db.Pool, dead, cache.New(dead, cache.Options{Prefix: "c:", TTL: time.Minute}, reg), "x:", log)
	orders := order.New(f.db.Pool, dead, inventory.NewStock(dead, "x:"), catalog.Exists, "x:", log, reg)
	svc := New(dead, catalog, orders, "x:", log, reg)
	// Auth needs Redis too; stand in for it so the cart's own answer shows.
	user := auth.User{ID: f.user(t), Role: auth.RoleShopper}
	asUser := func(c *fiber.Ctx) error {
		c.SetUserContext(auth.NewContextWithUser(c.UserContext(), user))
		return c.Next()
	}
	app := server.New(server.Deps{Log: log, Redis: dead, DB: f.db.Pool, Registry: reg, BodyLimit: 64 << 10,
		Mount: []func(fiber.Router){func(r fiber.Router) { svc.Routes(r, asUser) }}})
	routes := []struct{ method, path, body string }{
		{"GET", "/api/v1/cart", ""},
		{"DELETE", "/api/v1/cart", ""},
		{"POST", "/api/v1/cart/items", `{"sku":"p","quantity":1}`},
		{"PUT", "/api/v1/cart/items/p", `{"quantity":2}`},
		{"PUT", "/api/v1/cart/items/p", `{"quantity":0}`},
		{"DELETE", "/api/v1/cart/items/p", ""},
		{"POST", "/api/v1/cart/checkout", ""},
	}
	for _, rt := range routes {
		start := time.Now()
		r := reply{apitest.Do(t, app, rt.method, rt.path, "", rt.body, "Idempotency-Key", "k")}
		wantProblem(t, r, http.StatusServiceUnavailable, "unavailable")
		if r.Header.Get("Retry-After") == "" || time.Since(start) > 5*time.Second {
			t.Errorf("%s %s: Retry-After %q after %s", rt.method, rt.path, r.Header.Get("Retry-After"), time.Since(start))
		}
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
	h.do(t, "POST", "/api/v1/cart/items", tok, `{"sku":"p","quantity":2}`).cart(t)
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
			h.do(t, "PUT", "/api/v1/cart/items/p", tok, `{"quantity":2}`).cart(t)
			r := h.do(t, tc.method, tc.path, tok, tc.body)
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
