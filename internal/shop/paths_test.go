package shop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// Every path parameter is parsed at the edge: whatever a client puts in
// an id (a URN, braces, a NUL, a dot path, 1.5 KB, another script's
// letters), every route that takes one answers a problem document below
// 500, as openapi.yaml says, and never a 500. The routes are the app's
// own, so a new one is swept without being listed here.
func TestEveryPathParameterIsParsedAtTheEdge(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	_, admin := a.User(t, "admin@example.com", "admin")
	_, shopper := a.Shopper(t, "shopper@example.com")
	a.Sale(t, "known", 100, 5, 0)
	const id = "0b5b5f6e-3c1e-4c7a-9a3e-6f0c2d8e9a11"
	odd := []string{
		"urn:uuid:" + id, "{" + id + "}", strings.ToUpper(id), strings.ReplaceAll(id, "-", ""),
		"%00", "..", "%2E%2E", "a%2Fb", "%20", "%E2%80%AE", "%FF", strings.Repeat("9", 1500), "-1", "0x10", "1e3",
		url.PathEscape("ö'\"<>;--"),
	}
	for _, r := range a.Fiber.GetRoutes(true) {
		if r.Method == http.MethodHead || !strings.Contains(r.Path, ":") {
			continue
		}
		for _, v := range odd {
			path := substitute(r.Path, v)
			for _, token := range []string{admin, shopper} {
				rep := a.Do(t, r.Method, path, token, "{}")
				if rep.Status >= 500 {
					t.Errorf("%s %s: %d %s", r.Method, path, rep.Status, rep.Body)
				}
			}
		}
	}
}

// substitute puts v in the place of each parameter of a Fiber route path.
func substitute(path, v string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") {
			parts[i] = v
		}
	}
	return strings.Join(parts, "/")
}

// An order id is its canonical 36 characters (any case): the buyer's own
// order named as a URN or in braces is not found on every order route,
// and changes nothing.
func TestOrderIDsAreCanonical(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	a.Sale(t, "canon", 100, 5, 0)
	id, token := a.Shopper(t, "canon@example.com")
	r := a.Do(t, http.MethodPost, "/api/v1/products/canon/purchase", token, `{"quantity":1}`)
	if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
		t.Fatalf("purchase: %d %s", r.Status, r.Body)
	}
	oid := jsonString(t, r.Body, "order_id")
	for _, spelled := range []string{"urn:uuid:" + oid, "%7B" + oid + "%7D", strings.ReplaceAll(oid, "-", "")} {
		for _, c := range []struct{ method, path, body string }{
			{http.MethodGet, "/api/v1/orders/" + spelled, ""},
			{http.MethodPost, "/api/v1/orders/" + spelled + "/cancel", ""},
			{http.MethodPost, "/api/v1/orders/" + spelled + "/pay", `{"payment_token":"tok_ok"}`},
		} {
			if r := a.Do(t, c.method, c.path, token, c.body); r.Status != http.StatusNotFound {
				t.Errorf("%s %s: %d %s, want 404", c.method, c.path, r.Status, r.Body)
			}
		}
	}
	if o, err := a.Orders.Get(context.Background(), id, oid); err != nil || o.Status != "pending" && o.Status != "confirmed" {
		t.Fatalf("the order after the refused calls: %q %v", o.Status, err)
	}
}

func jsonString(t *testing.T, body []byte, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	s, _ := m[field].(string)
	return s
}
