package order

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/apitest"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/server"
)

type httpFixture struct {
	*fixture
	app  *fiber.App
	auth *auth.Service
}

// newHTTPFixture serves the order routes behind real auth. Products "known"
// and "ghost-but-listed" exist in the catalog stub; nothing else does.
func newHTTPFixture(t testing.TB) *httpFixture {
	t.Helper()
	f := newFixture(t)
	f.svc.exists = func(_ context.Context, sku string) (bool, error) {
		return sku == "known" || strings.HasPrefix(sku, "hot"), nil
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	a := auth.New(f.db.Pool, f.r.Client, auth.Config{Secret: []byte("order-tests-secret-0123456789abcdef"), KeyPrefix: f.r.Prefix, FastHashing: true}, log, reg)
	app := server.New(server.Deps{
		Log: log, Redis: f.r.Client, DB: f.db.Pool, Registry: reg, BodyLimit: 64 << 10,
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

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("%s: %v", r.Body, err)
	}
	return m
}

func (h *httpFixture) do(t *testing.T, method, path, token, body string, headers ...string) reply {
	t.Helper()
	return reply{apitest.Do(t, h.app, method, path, token, body, headers...)}
}

func wantProblem(t *testing.T, r reply, status int, code string) {
	t.Helper()
	apitest.WantProblem(t, r.Reply, status, code)
}

func TestPurchaseToConfirmedOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-1", 5, 2, 1250)
	_, tok := h.shopper(t, "ann@example.com")

	r := h.do(t, "POST", "/api/v1/products/hot-1/purchase", tok, `{"quantity":2}`)
	if r.Status != http.StatusAccepted || r.json(t)["status"] != "pending" {
		t.Fatalf("purchase: %d %s", r.Status, r.Body)
	}
	id := r.json(t)["order_id"].(string)
	if o := h.do(t, "GET", "/api/v1/orders/"+id, tok, "").json(t); o["status"] != "pending" || o["total_cents"] != 2500.0 {
		t.Fatalf("pending order: %v", o)
	}
	w := start(h.writer("w", WriterOptions{}))
	h.drained(t)
	w.stop(t)
	o := h.do(t, "GET", "/api/v1/orders/"+id, tok, "").json(t)
	if o["status"] != "confirmed" || o["total_cents"] != 2500.0 {
		t.Fatalf("confirmed order: %v", o)
	}
	list := h.do(t, "GET", "/api/v1/orders", tok, "").json(t)
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
	if r := h.do(t, "POST", "/api/v1/products/hot-lim/purchase", tok, ""); r.Status != http.StatusAccepted {
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
			wantProblem(t, h.do(t, "POST", tc.path, tc.token, tc.body), tc.status, tc.code)
		})
	}
	long := strings.Repeat("k", 256)
	wantProblem(t, h.do(t, "POST", "/api/v1/products/hot-lim/purchase", tok, `{}`, "Idempotency-Key", long), 400, "invalid_request")
	avail, _ := h.stock.Available(context.Background(), "hot-lim", "hot-empty")
	if avail[0] != 9 || avail[1] != 0 || h.r.Client.XLen(context.Background(), h.svc.keys.stream()).Val() != 1 {
		t.Fatalf("refusals changed the stock: %v", avail)
	}
}

func TestPurchaseIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-i", 10, 0, 100)
	_, tok := h.shopper(t, "cy@example.com")
	first := h.do(t, "POST", "/api/v1/products/hot-i/purchase", tok, `{"quantity":3}`, "Idempotency-Key", "buy-42")
	again := h.do(t, "POST", "/api/v1/products/hot-i/purchase", tok, `{"quantity":3}`, "Idempotency-Key", "buy-42")
	if first.Status != 202 || again.Status != 202 || first.json(t)["order_id"] != again.json(t)["order_id"] {
		t.Fatalf("first %s, again %s: want the same answer", first.Body, again.Body)
	}
	if avail, _ := h.stock.Available(context.Background(), "hot-i"); avail[0] != 7 {
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
	id := h.do(t, "POST", "/api/v1/products/hot-o/purchase", ann, `{}`).json(t)["order_id"].(string)
	wantProblem(t, h.do(t, "GET", "/api/v1/orders/"+id, eve, ""), 404, "not_found")
	if items := h.do(t, "GET", "/api/v1/orders", eve, "").json(t)["items"].([]any); len(items) != 0 {
		t.Fatalf("eve lists ann's orders: %v", items)
	}
	w := start(h.writer("w", WriterOptions{}))
	h.drained(t)
	w.stop(t)
	wantProblem(t, h.do(t, "GET", "/api/v1/orders/"+id, eve, ""), 404, "not_found")
	wantProblem(t, h.do(t, "GET", "/api/v1/orders/not-a-uuid", ann, ""), 404, "not_found")
	wantProblem(t, h.do(t, "GET", "/api/v1/orders?cursor=%%%", ann, ""), 400, "invalid_request")
	wantProblem(t, h.do(t, "GET", "/api/v1/orders?limit=0", ann, ""), 400, "invalid_request")
}

// Orders list newest first across pages, pending and confirmed together.
func TestListOrdersPages(t *testing.T) {
	t.Parallel()
	h := newHTTPFixture(t)
	h.sale(t, "hot-p", 100, 0, 100)
	_, tok := h.shopper(t, "pat@example.com")
	var ids []string
	for range 5 {
		ids = append(ids, h.do(t, "POST", "/api/v1/products/hot-p/purchase", tok, `{}`).json(t)["order_id"].(string))
	}
	// Persist the first three only: the list mixes both sources.
	w := h.writer("w", WriterOptions{Batch: 3})
	w.hookAfterCommit = nil
	r := start(w)
	deadline := h.count(t, `SELECT count(*) FROM orders`)
	for deadline < 3 {
		deadline = h.count(t, `SELECT count(*) FROM orders`)
	}
	r.stop(t)
	var got []string
	cursor := ""
	for page := 0; page < 5; page++ {
		path := "/api/v1/orders?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		body := h.do(t, "GET", path, tok, "").json(t)
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
