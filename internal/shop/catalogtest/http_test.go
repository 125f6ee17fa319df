package catalogtest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestProductLifecycle(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	r := in.do(t, http.MethodPost, "/api/v1/admin/products",
		`{"sku":"tee-1","name":"Tee","category":"shirts","price_cents":1999}`)
	if r.status != http.StatusCreated || r.header.Get("Location") != "/api/v1/products/tee-1" {
		t.Fatalf("create: %d %s (Location %q)", r.status, r.body, r.header.Get("Location"))
	}
	p := r.product(t)
	if p.SKU != "tee-1" || p.Name != "Tee" || p.Description != "" || p.Category != "shirts" || p.PriceCents != 1999 || p.Available != 0 {
		t.Errorf("created %+v", p)
	}
	if p.UpdatedAt.Location() != time.UTC || time.Since(p.UpdatedAt) > time.Minute {
		t.Errorf("updated_at = %v, want now in UTC", p.UpdatedAt)
	}
	if !strings.Contains(string(r.body), `"updated_at":"`) || !strings.Contains(string(r.body), `Z"`) {
		t.Errorf("updated_at is not RFC 3339 UTC: %s", r.body)
	}
	in.do(t, http.MethodPost, "/api/v1/admin/products",
		`{"sku":"tee-1","name":"Other","category":"x","price_cents":1}`).problem(t, http.StatusConflict, "sku_taken")

	if got := in.do(t, http.MethodGet, "/api/v1/products/tee-1", "").product(t); got != p {
		t.Errorf("get = %+v, want %+v", got, p)
	}
	r = in.do(t, http.MethodPut, "/api/v1/admin/products/tee-1",
		`{"name":"Tee v2","description":"Soft","category":"tops","price_cents":2499}`)
	if r.status != http.StatusOK {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	want := r.product(t)
	if want.Name != "Tee v2" || want.Category != "tops" || want.PriceCents != 2499 || !want.UpdatedAt.After(p.UpdatedAt) {
		t.Errorf("updated %+v", want)
	}
	if got := in.do(t, http.MethodGet, "/api/v1/products/tee-1", "").product(t); got != want {
		t.Errorf("get after update = %+v, want %+v", got, want)
	}
	if r := in.do(t, http.MethodDelete, "/api/v1/admin/products/tee-1", ""); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	in.do(t, http.MethodGet, "/api/v1/products/tee-1", "").problem(t, http.StatusNotFound, "not_found")
	in.do(t, http.MethodDelete, "/api/v1/admin/products/tee-1", "").problem(t, http.StatusNotFound, "not_found")
	in.do(t, http.MethodPut, "/api/v1/admin/products/tee-1",
		`{"name":"x","description":"","category":"c","price_cents":1}`).problem(t, http.StatusNotFound, "not_found")
	// Created again after the delete (and its cached not-found): seen at once.
	in.create(t, "tee-1", "shirts", 5)
	if got := in.do(t, http.MethodGet, "/api/v1/products/tee-1", "").product(t); got.PriceCents != 5 {
		t.Errorf("recreated product reads %+v", got)
	}
}

func TestMissingProductIsNotFound(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	for _, path := range []string{"/api/v1/products/nope", "/api/v1/products/bad%21sku", "/api/v1/products/" + strings.Repeat("a", 65)} {
		in.do(t, http.MethodGet, path, "").problem(t, http.StatusNotFound, "not_found")
	}
	// The miss was cached briefly; a create must still show at once.
	in.create(t, "nope", "c", 1)
	if r := in.do(t, http.MethodGet, "/api/v1/products/nope", ""); r.status != http.StatusOK {
		t.Fatalf("after create: %d %s", r.status, r.body)
	}
}

func TestAdminRoutesNeedTheAdminRole(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	in.create(t, "p1", "c", 1)
	routes := []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/admin/products", productJSON("p2", "c", 1)},
		{http.MethodPut, "/api/v1/admin/products/p1", `{"name":"x","description":"","category":"c","price_cents":9}`},
		{http.MethodDelete, "/api/v1/admin/products/p1", ""},
		{http.MethodPost, "/api/v1/admin/categories/c/invalidate", ""},
	}
	for _, rt := range routes {
		t.Run(rt.method+rt.path, func(t *testing.T) {
			r := in.doAs(t, "", rt.method, rt.path, rt.body)
			r.problem(t, http.StatusUnauthorized, "unauthorized")
			if r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			in.doAs(t, in.users.shopper, rt.method, rt.path, rt.body).problem(t, http.StatusForbidden, "forbidden")
		})
	}
	if p := in.do(t, http.MethodGet, "/api/v1/products/p1", "").product(t); p.PriceCents != 1 {
		t.Errorf("a refused write changed the product: %+v", p)
	}
	if r := in.do(t, http.MethodGet, "/api/v1/products/p2", ""); r.status != http.StatusNotFound {
		t.Errorf("a refused create wrote p2: %d", r.status)
	}
}

func TestBadProductInputChangesNothing(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	in.create(t, "keep", "c", 100)
	long := func(n int) string { return strings.Repeat("é", n) }
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		fields []string
	}{
		{"negative_price", "POST", "", `{"sku":"n1","name":"A","category":"c","price_cents":-1}`, []string{"price_cents"}},
		{"price_too_high", "POST", "", `{"sku":"n1","name":"A","category":"c","price_cents":100000000001}`, []string{"price_cents"}},
		{"price_just_over_max", "POST", "", `{"sku":"n1","name":"A","category":"c","price_cents":100000001}`, []string{"price_cents"}},
		{"price_past_2_53", "POST", "", `{"sku":"n1","name":"A","category":"c","price_cents":9007199254740993}`, []string{"price_cents"}},
		{"price_fraction", "POST", "", `{"sku":"n1","name":"A","category":"c","price_cents":1.5}`, []string{"price_cents"}},
		{"price_string", "POST", "", `{"sku":"n1","name":"A","category":"c","price_cents":"12"}`, []string{"price_cents"}},
		{"price_overflow", "POST", "", `{"sku":"n1","name":"A","category":"c","price_cents":1e40}`, []string{"price_cents"}},
		{"empty_name", "POST", "", `{"sku":"n1","name":"","category":"c","price_cents":1}`, []string{"name"}},
		{"blank_name", "POST", "", `{"sku":"n1","name":"   ","category":"c","price_cents":1}`, []string{"name"}},
		{"nul_in_name", "POST", "", `{"sku":"n1","name":"a\u0000b","category":"c","price_cents":1}`, []string{"name"}},
		{"name_too_long", "POST", "", fmt.Sprintf(`{"sku":"n1","name":%q,"category":"c","price_cents":1}`, long(201)), []string{"name"}},
		{"description_too_long", "POST", "", fmt.Sprintf(`{"sku":"n1","name":"A","description":%q,"category":"c","price_cents":1}`, long(5001)), []string{"description"}},
		{"sku_too_long", "POST", "", productJSON(strings.Repeat("s", 65), "c", 1), []string{"sku"}},
		{"sku_bad_chars", "POST", "", productJSON("a/b", "c", 1), []string{"sku"}},
		{"category_bad", "POST", "", productJSON("n1", "a b", 1), []string{"category"}},
		// "." and ".." are dot-segments in a path: a product with such a sku
		// could never be addressed, since clients resolve them away.
		{"sku_dot", "POST", "", productJSON(".", "c", 1), []string{"sku"}},
		{"sku_dotdot", "POST", "", productJSON("..", "c", 1), []string{"sku"}},
		{"sku_leading_dot", "POST", "", productJSON(".n1", "c", 1), []string{"sku"}},
		{"sku_leading_dash", "POST", "", productJSON("-n1", "c", 1), []string{"sku"}},
		{"sku_leading_underscore", "POST", "", productJSON("_n1", "c", 1), []string{"sku"}},
		{"category_dot", "POST", "", productJSON("n1", ".", 1), []string{"category"}},
		{"category_dotdot", "POST", "", productJSON("n1", "..", 1), []string{"category"}},
		{"update_category_dotdot", "PUT", "keep", `{"name":"B","description":"","category":"..","price_cents":1}`, []string{"category"}},
		{"name_wrong_type", "POST", "", `{"sku":"n1","name":5,"category":"c","price_cents":1}`, []string{"name"}},
		{"everything_wrong", "POST", "", `{"sku":"","name":"","category":"!","price_cents":-5,"description":7}`, []string{"description", "sku", "name", "category", "price_cents"}},
		{"missing_fields", "POST", "", `{}`, []string{"sku", "name", "category", "price_cents"}},
		{"not_an_object", "POST", "", `[1]`, []string{"body"}},
		{"malformed", "POST", "", `{"sku":`, []string{"body"}},
		{"update_missing_fields", "PUT", "keep", `{"name":"B"}`, []string{"description", "category", "price_cents"}},
		{"update_negative_price", "PUT", "keep", `{"name":"B","description":"","category":"c","price_cents":-1}`, []string{"price_cents"}},
		{"update_price_over_max", "PUT", "keep", `{"name":"B","description":"","category":"c","price_cents":100000001}`, []string{"price_cents"}},
		{"update_other_sku", "PUT", "keep", `{"sku":"other","name":"B","description":"","category":"c","price_cents":1}`, []string{"sku"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := "/api/v1/admin/products"
			if tc.method == "PUT" {
				path += "/" + tc.path
			}
			got := in.do(t, tc.method, path, tc.body).fields(t)
			slices.Sort(got)
			want := slices.Clone(tc.fields)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("fields = %v, want %v", got, want)
			}
		})
	}
	in.do(t, http.MethodGet, "/api/v1/products/n1", "").problem(t, http.StatusNotFound, "not_found")
	if p := in.do(t, http.MethodGet, "/api/v1/products/keep", "").product(t); p.Name != "Product keep" || p.PriceCents != 100 {
		t.Errorf("a refused update changed the product: %+v", p)
	}
	if page := in.do(t, http.MethodGet, "/api/v1/products", "").page(t); len(page.Items) != 1 {
		t.Errorf("listing has %d products, want only keep", len(page.Items))
	}
}

func TestUnknownFieldsAreIgnored(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	r := in.do(t, http.MethodPost, "/api/v1/admin/products",
		`{"sku":"u1","name":"A","category":"c","price_cents":1,"available":99,"updated_at":5,"extra":{"x":[1]}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if p := r.product(t); p.Available != 0 {
		t.Errorf("available taken from the client: %+v", p)
	}
}

// The largest price is accepted on create and update; see MaxPriceCents for
// why it is no larger.
func TestPriceAtTheBound(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	if p := in.create(t, "dear", "c", 100_000_000); p.PriceCents != 100_000_000 {
		t.Fatalf("created %+v", p)
	}
	r := in.do(t, http.MethodPut, "/api/v1/admin/products/dear", `{"name":"n","description":"","category":"c","price_cents":100000000}`)
	if r.status != http.StatusOK || r.product(t).PriceCents != 100_000_000 {
		t.Fatalf("update at the bound: %d %s", r.status, r.body)
	}
}
