package ordertest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/orderhttp"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// FuzzPurchase sends arbitrary skus, bodies and Idempotency-Keys through the
// real app to POST /products/{sku}/purchase (drill 29): never a 5xx, every
// 4xx a problem document, and a refusal takes no stock and enqueues
// nothing; an acceptance takes 1 to MaxQuantity units with one order event.
func FuzzPurchase(f *testing.F) {
	h := newHTTPFixture(f)
	h.sale(f, "hot-f", 100_000_000, 0, 100)
	_, tok := h.shopper(f, "fuzz@example.com")
	for _, s := range []struct{ sku, body, key string }{
		{"hot-f", `{"quantity":1}`, ""},
		{"hot-f", ``, "k-1"},
		{"hot-f", `{"quantity":10000}`, "k-2"},
		{"hot-f", `{"quantity":10001}`, ""},
		{"hot-f", `{"quantity":-1}`, ""},
		{"hot-f", `{"quantity":1e400}`, ""},
		{"hot-f", `{"quantity":99999999999999999999}`, ""},
		{"hot-f", `{"quantity":"1"}`, ""},
		{"hot-f", `{"quantity":null}`, ""},
		{"hot-f", `{"a[-1]":"x","a.18446744073704":1}`, ""},
		{"hot-f", "{\"quantity\":1,\"x\":\"\x00\xff\"}", "\x00"},
		{"hot-f", `[1]`, ""},
		{"hot-f", `{"quantity":1}{"quantity":2}`, ""},
		{"known", `{}`, ""},
		{"..", `{}`, ""},
		{"nope", `{}`, ""},
		{"hot f", `{}`, ""},
		{"\xff", `{}`, "\xfe"},
	} {
		f.Add(s.sku, []byte(s.body), s.key)
	}
	ctx := context.Background()
	stream := h.Config.KeyPrefix + "orders"
	f.Fuzz(func(t *testing.T, sku string, body []byte, key string) {
		before, _ := h.Stock.Available(ctx, "hot-f")
		events := h.Redis.Client.XLen(ctx, stream).Val()
		var headers []string
		if key != "" {
			headers = []string{orderhttp.HeaderIdempotencyKey, key}
		}
		path := "/api/v1/products/" + url.PathEscape(sku) + "/purchase"
		if len(path)+len(key) > shoptest.MaxFuzzPath {
			t.Skip()
		}
		r := openapitest.Do(t, h.Fiber, http.MethodPost, path, tok, string(body), headers...)
		openapitest.WantSound(t, r)
		after, _ := h.Stock.Available(ctx, "hot-f")
		taken, added := before[0]-after[0], h.Redis.Client.XLen(ctx, stream).Val()-events
		switch {
		case r.Status != http.StatusAccepted && (taken != 0 || added != 0):
			t.Fatalf("%d took %d units and enqueued %d events", r.Status, taken, added)
		case r.Status == http.StatusAccepted && !(taken == 0 && added == 0 || taken >= 1 && taken <= 10000 && added == 1):
			t.Fatalf("202 took %d units with %d events", taken, added)
		case r.Status == http.StatusAccepted:
			var p order.Placed
			if err := json.Unmarshal(r.Body, &p); err != nil || p.OrderID == "" {
				t.Fatalf("202 body %s", r.Body)
			}
		}
	})
}
