package e2e

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Drill 20 on the live server: tokens that are well signed but must not
// pass. A copy of a real access token with a future nbf, and a refresh
// token presented as an access token, are both 401; the same copy without
// the nbf passes, so it is the nbf that is refused.
func TestDrillTokensRefusedLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := startServer(t, e)
	api := s.URL + "/api/v1"
	call(t, http.MethodPost, api+"/auth/register", map[string]string{"email": "nbf@example.com", "password": "correct horse battery"})
	tok := login(t, api, "nbf@example.com", "correct horse battery")
	resign := func(change func(jwt.MapClaims)) string {
		claims := jwt.MapClaims{}
		if _, err := jwt.ParseWithClaims(tok.AccessToken, claims, func(*jwt.Token) (any, error) {
			return []byte(e["SHOP_JWT_SECRET"]), nil
		}); err != nil {
			t.Fatal(err)
		}
		change(claims)
		t2 := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
		t2.Header["typ"] = "at+jwt"
		signed, err := t2.SignedString([]byte(e["SHOP_JWT_SECRET"]))
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	tests := []struct {
		name, token string
		want        int
	}{
		{"resigned_copy", resign(func(jwt.MapClaims) {}), http.StatusOK},
		{"future_nbf", resign(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), http.StatusUnauthorized},
		{"refresh_as_access", tok.RefreshToken, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		if got := me(t, api, tc.token); got.Status != tc.want {
			t.Errorf("%s: /me = %d %s, want %d", tc.name, got.Status, got.Body, tc.want)
		}
	}
}

// Who may call a route, by its path; anything not listed here is for a
// logged-in shopper, so a new public route fails the matrix until it is
// added, and a new route is never assumed open.
var publicRoutes = map[string]bool{
	"GET /healthz": true, "GET /readyz": true, "GET /metrics": true, "GET /openapi.yaml": true,
	"GET /api/v1/products": true, "GET /api/v1/products/:sku": true,
	"POST /api/v1/auth/register": true, "POST /api/v1/auth/login": true, "POST /api/v1/auth/refresh": true,
	"GET /api/v1/products/:sku/events": true, "GET /": true, "GET /assets/:file": true, "GET /favicon.ico": true,
	"GET /shared/client.js": true, // the client both pages load
	// The admin console's page and files are public; what it calls is not.
	"GET /admin": true, "GET /admin/assets/:file": true,
	// docs/api.md: best sellers and store reads are public.
	"GET /api/v1/best-sellers": true, "GET /api/v1/best-sellers/:sku": true,
	"GET /api/v1/stores": true, "GET /api/v1/stores/:id": true, "GET /api/v1/stores/nearby": true,
	// docs/api.md: a product's image is public, like the product.
	"GET /api/v1/products/:sku/image/:hash": true,
	// docs/api.md: a room's fairness answer is public; a ticket's stream needs
	// no header (its unguessable URL is the credential).
	"GET /api/v1/products/:sku/queue/fairness": true, "GET /api/v1/products/:sku/queue/events/:token": true,
	// docs/api.md: a draw's answer (its seed and winners' digest once drawn) is public.
	"GET /api/v1/products/:sku/draw": true,
}

func routeClass(route string) string {
	switch {
	case publicRoutes[route]:
		return "public"
	case strings.Contains(route, " /api/v1/admin/"):
		return "admin"
	}
	return "shopper"
}

// Drill 23: every route `shop serve` mounts (listed by `shop routes`, so a
// new one is in the matrix at once) called three ways: anonymously, as
// shopper A with shopper B's ids, and as an admin. Shopper and admin
// routes refuse anonymous callers (401); admin routes refuse shoppers
// (403); A never reads or changes B's order or cart; nothing answers 5xx.
// A purchase body carrying a price, a user and stock fields buys at the
// catalog price for the caller, or is refused.
func TestDrillAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e)
	out, stderr, err := runShop(t, e, "routes")
	if err != nil {
		t.Fatalf("shop routes: %v %s", err, stderr)
	}
	routes := strings.Split(strings.TrimSpace(out), "\n")
	if !slices.Contains(routes, "POST /api/v1/admin/orders/:id/refund") { // an admin route that moves money
		t.Fatalf("shop routes lacks the refund route: %q", routes)
	}
	// Logging out ends the caller's session: last, after every other route.
	last := func(r string) int {
		if strings.HasSuffix(r, "/logout") {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(routes, func(x, y string) int { return cmp.Compare(last(x), last(y)) })
	s.product(t, "matrix-b", 700, map[string]any{"quantity": 10, "per_user_limit": 0})
	s.product(t, "matrix-victim", 700, map[string]any{"quantity": 10, "per_user_limit": 0})
	tok := s.shoppers(t, 2, "matrix")
	a, b := tok[0], tok[1]
	bOrder := s.purchase(t, b, "matrix-b", 1, "b-order")
	bAuth := []string{"Authorization", "Bearer " + b}
	if r := call(t, http.MethodPost, s.api+"/cart/items", map[string]any{"sku": "matrix-b", "quantity": 2}, bAuth...); r.Status >= 300 {
		t.Fatalf("B's cart: %d %s", r.Status, r.Body)
	}
	overposted(t, s, a, b)
	fill := func(path, sku string) string {
		path = strings.ReplaceAll(path, ":sku", sku)
		path = strings.ReplaceAll(path, ":id", bOrder.orderID)
		path = strings.ReplaceAll(path, ":file", "app.js")
		return strings.ReplaceAll(path, ":category", "e2e")
	}
	callers := []struct{ name, token, sku string }{
		{"anonymous", "", "matrix-b"}, {"shopper A", a, "matrix-b"}, {"admin", s.admin, "matrix-victim"},
	}
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		class := routeClass(route)
		for _, c := range callers {
			var headers []string
			if c.token != "" {
				headers = []string{"Authorization", "Bearer " + c.token}
			}
			var body any
			if method != http.MethodGet && method != http.MethodDelete {
				body = map[string]any{}
			}
			var r response
			if strings.HasSuffix(path, "/events") { // a stream: its answer, not its endless body
				r = streamAnswer(t, s.URL+fill(path, c.sku), headers...)
			} else {
				r = call(t, method, s.URL+fill(path, c.sku), body, headers...)
			}
			if bad := matrixVerdict(class, c.name, route, r.Status); bad != "" {
				t.Errorf("%s as %s: %d %s: %s", route, c.name, r.Status, r.Body, bad)
			}
		}
	}
	// B's order and cart are as they were.
	if r := call(t, http.MethodGet, s.api+"/orders/"+bOrder.orderID, nil, bAuth...); r.Status != http.StatusOK {
		t.Errorf("B's order after the matrix: %d %s", r.Status, r.Body)
	}
	if r := call(t, http.MethodGet, s.api+"/cart", nil, bAuth...); !strings.Contains(string(r.Body), `"matrix-b"`) {
		t.Errorf("B's cart after the matrix: %d %s", r.Status, r.Body)
	}
}

// matrixVerdict says what is wrong with status for a caller of a route of
// class ("" when nothing).
func matrixVerdict(class, caller, route string, status int) string {
	switch {
	case status >= 500:
		return "a 5xx"
	case class != "public" && caller == "anonymous" && status != http.StatusUnauthorized:
		return "an anonymous caller must get 401"
	case class == "admin" && caller == "shopper A" && status != http.StatusForbidden:
		return "a shopper must get 403 on an admin route"
	case class != "admin" && strings.Contains(route, "/orders/:id") && caller == "shopper A" && status != http.StatusNotFound:
		return "shopper A must not see B's order (404)"
	case caller != "anonymous" && class != "admin" && (status == http.StatusUnauthorized || status == http.StatusForbidden):
		return "refused a caller who may call it"
	case caller == "admin" && (status == http.StatusUnauthorized || status == http.StatusForbidden):
		return "refused the admin"
	}
	return ""
}

// overposted: fields a client must not set, in a purchase body, never
// change the price or the owner.
func overposted(t *testing.T, s *shop, a, b string) {
	t.Helper()
	r := bulk(t, http.MethodPost, s.api+"/products/matrix-b/purchase",
		map[string]any{"quantity": 1, "price_cents": 1, "total_cents": 1, "user_id": "someone", "stock": 1000},
		"Authorization", "Bearer "+a, "Idempotency-Key", "overpost")
	if r.Status == http.StatusBadRequest {
		return // strict bodies: unknown fields refused, nothing bought
	}
	var placed struct {
		OrderID string `json:"order_id"`
	}
	r.JSON(t, &placed)
	if r.Status != http.StatusAccepted {
		t.Fatalf("purchase with extra fields: %d %s", r.Status, r.Body)
	}
	var o struct {
		TotalCents int64 `json:"total_cents"`
	}
	call(t, http.MethodGet, s.api+"/orders/"+placed.OrderID, nil, "Authorization", "Bearer "+a).JSON(t, &o)
	if o.TotalCents != 700 {
		t.Errorf("an over-posted purchase cost %d, want the catalog's 700", o.TotalCents)
	}
	if r := call(t, http.MethodGet, s.api+"/orders/"+placed.OrderID, nil, "Authorization", "Bearer "+b); r.Status != http.StatusNotFound {
		t.Errorf("B sees A's over-posted order: %d", r.Status)
	}
}
