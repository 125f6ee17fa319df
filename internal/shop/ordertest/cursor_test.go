// Package ordertest holds internal/order's tests through the whole application
// (shoptest), so order's own tests build only order and what it imports.
package ordertest

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/openapitest"
)

// Only what the API hands out is accepted: a cursor exactly as encoded, an
// order id in its 36-character form. A forged cursor is a 400 naming it
// (an "urn:uuid:" id in one reached PostgreSQL's uuid cast: 22P02, a 503);
// another spelling of an order id is no order (404).
func TestOrderCursorsAndIDsAreCanonical(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-c", 10, 0, 100)
	_, tok := h.shopper(t, "cur@example.com")
	var id string
	for range 3 {
		id = h.Do(t, "POST", "/api/v1/products/hot-c/purchase", tok, `{}`).JSON(t)["order_id"].(string)
	}
	h.Drain(t)
	next, _ := h.Do(t, "GET", "/api/v1/orders?limit=1", tok, "").JSON(t)["next_cursor"].(string)
	if next == "" {
		t.Fatal("no next_cursor")
	}
	if r := h.Do(t, "GET", "/api/v1/orders?limit=1&cursor="+next, tok, ""); r.Status != http.StatusOK {
		t.Fatalf("a real cursor: %d %s", r.Status, r.Body)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	at := func(s string) string { return b64([]byte(s)) }
	cursors := map[string]string{
		"urn_uuid":        at("1700000000000000.urn:uuid:" + id),
		"braces":          at("1700000000000000.{" + id + "}"),
		"bare_hex":        at("1700000000000000." + strings.ReplaceAll(id, "-", "")),
		"upper_case_id":   at("1700000000000000." + strings.ToUpper(id)),
		"no_id":           at("1700000000000000."),
		"no_dot":          at("1700000000000000"),
		"negative_time":   at("-1." + id),
		"max_time":        at("9223372036854775807." + id),
		"min_time":        at("-9223372036854775808." + id),
		"leading_zeros":   at("0001700000000000000." + id),
		"plus_sign":       at("+1700000000000000." + id),
		"time_not_number": at("soon." + id),
		"padded_base64":   next + strings.Repeat("=", (4-len(next)%4)%4+4),
		"std_base64":      base64.StdEncoding.EncodeToString([]byte("1700000000000000." + id)),
		"not_base64":      "%%%",
		"nul_byte":        at("1700000000000000." + id + "\x00"),
		"two_dots":        at("1.2." + id),
	}
	for name, c := range cursors {
		t.Run("cursor_"+name, func(t *testing.T) {
			r := h.Do(t, "GET", "/api/v1/orders?cursor="+c, tok, "")
			openapitest.WantProblem(t, r, http.StatusBadRequest, "invalid_request")
			if !strings.Contains(string(r.Body), `"field":"cursor"`) {
				t.Errorf("the problem does not name cursor: %s", r.Body)
			}
		})
	}
	ids := map[string]string{
		"urn_uuid": "urn:uuid:" + id,
		"braces":   "%7B" + id + "%7D",
		"bare_hex": strings.ReplaceAll(id, "-", ""),
		"too_long": id + "0",
	}
	for name, bad := range ids {
		t.Run("id_"+name, func(t *testing.T) {
			openapitest.WantProblem(t, h.Do(t, "GET", "/api/v1/orders/"+bad, tok, ""), http.StatusNotFound, "not_found")
		})
	}
	// RFC 9562 reads hex case-insensitively: the same id, upper case.
	if r := h.Do(t, "GET", "/api/v1/orders/"+strings.ToUpper(id), tok, ""); r.Status != http.StatusOK || r.JSON(t)["order_id"] != id {
		t.Fatalf("upper-case id: %d %s", r.Status, r.Body)
	}
}
