package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestCatalogPublicReads: the built binary serves the catalog's public
// routes. (Admin writes need auth, which lands separately; they are tested
// in-process in internal/inventory.)
func TestCatalogPublicReads(t *testing.T) {
	t.Parallel()
	s := startServer(t, newEnv(t))

	r := call(t, http.MethodGet, s.URL+"/api/v1/products/no-such-sku", nil)
	if r.Status != http.StatusNotFound || r.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(r.Body), `"code":"not_found"`) {
		t.Errorf("missing sku = %d %s", r.Status, r.Body)
	}

	r = call(t, http.MethodGet, s.URL+"/api/v1/products", nil)
	if r.Status != http.StatusOK || string(r.Body) != `{"items":[],"next_cursor":null}` {
		t.Errorf("empty listing = %d %s", r.Status, r.Body)
	}

	r = call(t, http.MethodGet, s.URL+"/api/v1/products?limit=1000", nil)
	var p struct {
		Code   string `json:"code"`
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	r.JSON(t, &p)
	if r.Status != http.StatusBadRequest || p.Code != "invalid_request" || len(p.Errors) != 1 || p.Errors[0].Field != "limit" {
		t.Errorf("bad limit = %d %s", r.Status, r.Body)
	}

}
