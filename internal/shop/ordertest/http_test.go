package ordertest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// httpFixture is the whole application, wired as shop serve wires it.
type httpFixture struct{ *shoptest.App }

// newHTTPFixture builds the application; the product "known" exists but
// was never put on sale.
func newHTTPFixture(t testing.TB) httpFixture {
	t.Helper()
	h := httpFixture{shoptest.New(t, shoptest.Options{})}
	h.Product(t, "known", 100)
	return h
}

// sale puts quantity units of a new product on sale.
func (h httpFixture) sale(t testing.TB, sku string, quantity, limit int, price int64) {
	t.Helper()
	h.Sale(t, sku, price, quantity, limit)
}

func (h httpFixture) shopper(t testing.TB, email string) (string, string) {
	t.Helper()
	return h.Shopper(t, email)
}

func (h httpFixture) count(t testing.TB, query string) int64 {
	t.Helper()
	var n int64
	if err := h.DB.Pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// writer runs an order writer in the background until stop is called.
func (h httpFixture) writer(t testing.TB, o writer.Options) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Writer(o).Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	}
}

func TestPurchaseToConfirmedOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-1", 5, 2, 1250)
	_, tok := h.shopper(t, "ann@example.com")

	r := h.Do(t, "POST", "/api/v1/products/hot-1/purchase", tok, `{"quantity":2}`)
	if r.Status != http.StatusAccepted || r.JSON(t)["status"] != "pending" {
		t.Fatalf("purchase: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["order_id"].(string)
	if o := h.Do(t, "GET", "/api/v1/orders/"+id, tok, "").JSON(t); o["status"] != "pending" || o["total_cents"] != 2500.0 {
		t.Fatalf("pending order: %v", o)
	}
	h.Drain(t)
	o := h.Do(t, "GET", "/api/v1/orders/"+id, tok, "").JSON(t)
	if o["status"] != "confirmed" || o["total_cents"] != 2500.0 {
		t.Fatalf("confirmed order: %v", o)
	}
	list := h.Do(t, "GET", "/api/v1/orders", tok, "").JSON(t)
	if items := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["order_id"] != id {
		t.Fatalf("list: %v", list)
	}
}

func TestPurchaseRefusals(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-empty", 0, 1, 100)
	h.sale(t, "hot-lim", 10, 1, 100)
	_, tok := h.shopper(t, "bob@example.com")
	if r := h.Do(t, "POST", "/api/v1/products/hot-lim/purchase", tok, ""); r.Status != http.StatusAccepted {
		t.Fatalf("first purchase (no body: quantity 1): %d %s", r.Status, r.Body)
	}
	tests := []struct {
		name, path, token, body string
		status                  int
		code                    string
	}{
		{"sold_out", "/api/v1/products/hot-empty/purchase", tok, `{}`, 409, "out_of_stock"},
		{"over_limit", "/api/v1/products/hot-lim/purchase", tok, `{"quantity":1}`, 409, "limit_exceeded"},
		{"not_on_sale", "/api/v1/products/known/purchase", tok, `{}`, 409, "sale_not_active"},
		{"unknown_sku", "/api/v1/products/nothing/purchase", tok, `{}`, 404, "not_found"},
		{"impossible_sku", "/api/v1/products/bad%20sku!/purchase", tok, `{}`, 404, "not_found"},
		{"zero", "/api/v1/products/hot-lim/purchase", tok, `{"quantity":0}`, 400, "invalid_request"},
		{"negative", "/api/v1/products/hot-lim/purchase", tok, `{"quantity":-3}`, 400, "invalid_request"},
		{"too_many", "/api/v1/products/hot-lim/purchase", tok, `{"quantity":10001}`, 400, "invalid_request"},
		{"fraction", "/api/v1/products/hot-lim/purchase", tok, `{"quantity":1.5}`, 400, "invalid_request"},
		{"string", "/api/v1/products/hot-lim/purchase", tok, `{"quantity":"1"}`, 400, "invalid_request"},
		{"not_object", "/api/v1/products/hot-lim/purchase", tok, `[1]`, 400, "invalid_request"},
		{"no_token", "/api/v1/products/hot-lim/purchase", "", `{}`, 401, "unauthorized"},
		{"bad_token", "/api/v1/products/hot-lim/purchase", "x.y.z", `{}`, 401, "unauthorized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			openapitest.WantProblem(t, h.Do(t, "POST", tc.path, tc.token, tc.body), tc.status, tc.code)
		})
	}
	long := strings.Repeat("k", 256)
	openapitest.WantProblem(t, h.Do(t, "POST", "/api/v1/products/hot-lim/purchase", tok, `{}`, "Idempotency-Key", long), 400, "invalid_request")
	avail, _ := h.Stock.Available(context.Background(), "hot-lim", "hot-empty")
	if avail[0] != 9 || avail[1] != 0 || h.Redis.Client.XLen(context.Background(), h.Config.KeyPrefix+"orders").Val() != 1 {
		t.Fatalf("refusals changed the stock: %v", avail)
	}
}

func TestPurchaseIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-i", 10, 0, 100)
	_, tok := h.shopper(t, "cy@example.com")
	first := h.Do(t, "POST", "/api/v1/products/hot-i/purchase", tok, `{"quantity":3}`, "Idempotency-Key", "buy-42")
	again := h.Do(t, "POST", "/api/v1/products/hot-i/purchase", tok, `{"quantity":3}`, "Idempotency-Key", "buy-42")
	if first.Status != 202 || again.Status != 202 || first.JSON(t)["order_id"] != again.JSON(t)["order_id"] {
		t.Fatalf("first %s, again %s: want the same answer", first.Body, again.Body)
	}
	if avail, _ := h.Stock.Available(context.Background(), "hot-i"); avail[0] != 7 {
		t.Fatalf("available = %d, want 7: the repeat bought again", avail[0])
	}
}

// Nothing of one shopper is reachable with another's token.
func TestOrdersAreOwnersOnly(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-o", 10, 0, 100)
	_, ann := h.shopper(t, "ann2@example.com")
	_, eve := h.shopper(t, "eve@example.com")
	id := h.Do(t, "POST", "/api/v1/products/hot-o/purchase", ann, `{}`).JSON(t)["order_id"].(string)
	openapitest.WantProblem(t, h.Do(t, "GET", "/api/v1/orders/"+id, eve, ""), 404, "not_found")
	if items := h.Do(t, "GET", "/api/v1/orders", eve, "").JSON(t)["items"].([]any); len(items) != 0 {
		t.Fatalf("eve lists ann's orders: %v", items)
	}
	h.Drain(t)
	openapitest.WantProblem(t, h.Do(t, "GET", "/api/v1/orders/"+id, eve, ""), 404, "not_found")
	openapitest.WantProblem(t, h.Do(t, "GET", "/api/v1/orders/not-a-uuid", ann, ""), 404, "not_found")
	openapitest.WantProblem(t, h.Do(t, "GET", "/api/v1/orders?cursor=%%%", ann, ""), 400, "invalid_request")
	openapitest.WantProblem(t, h.Do(t, "GET", "/api/v1/orders?limit=0", ann, ""), 400, "invalid_request")
}

// Orders list newest first across pages, pending and confirmed together.
func TestListOrdersPages(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-p", 100, 0, 100)
	_, tok := h.shopper(t, "pat@example.com")
	var ids []string
	for range 5 {
		ids = append(ids, h.Do(t, "POST", "/api/v1/products/hot-p/purchase", tok, `{}`).JSON(t)["order_id"].(string))
	}
	// Persist the first three only: the list mixes both sources.
	stop := h.writer(t, writer.Options{Consumer: "w", Batch: 3})
	for h.count(t, `SELECT count(*) FROM orders`) < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	var got []string
	cursor := ""
	for page := 0; page < 5; page++ {
		path := "/api/v1/orders?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		body := h.Do(t, "GET", path, tok, "").JSON(t)
		for _, it := range body["items"].([]any) {
			got = append(got, it.(map[string]any)["order_id"].(string))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != 5 {
		t.Fatalf("listed %d orders, want 5: %v", len(got), got)
	}
	for i := range got {
		if got[i] != ids[len(ids)-1-i] {
			t.Fatalf("order %d = %s, want %s (newest first)", i, got[i], ids[len(ids)-1-i])
		}
	}
}
