package catalogtest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// TestRedisDown: the catalog answers from PostgreSQL with available 0, and
// counts the cache errors; a catalog write still commits (PostgreSQL is the
// system of record), though over HTTP an admin's token cannot be checked
// without Redis, so admin routes answer 503, never a 401 or a 500.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	newInstance(t, st) // logs the test users in while Redis answers
	st.exec(t, `INSERT INTO products (sku, name, category, price_cents) VALUES ('p1', 'One', 'c', 10)`)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	st.rdb = dead
	in := newInstance(t, st)
	start := time.Now()
	if p := in.do(t, http.MethodGet, "/api/v1/products/p1", "").product(t); p.Name != "One" || p.Available != 0 {
		t.Errorf("get = %+v", p)
	}
	in.do(t, http.MethodGet, "/api/v1/products/nope", "").problem(t, http.StatusNotFound, "not_found")
	if p := in.do(t, http.MethodGet, "/api/v1/products?category=c", "").page(t); len(p.Items) != 1 {
		t.Errorf("list = %+v", p)
	}
	if _, err := in.Catalog.Create(context.Background(), "p2", inventoryInput("c", 5)); err != nil {
		t.Errorf("create with Redis down: %v", err)
	}
	in.do(t, http.MethodPost, "/api/v1/admin/products", productJSON("p3", "c", 5)).problem(t, http.StatusServiceUnavailable, "unavailable")
	if p := in.do(t, http.MethodGet, "/api/v1/products/p2", "").product(t); p.PriceCents != 5 {
		t.Errorf("created product reads %+v", p)
	}
	r := in.do(t, http.MethodPost, "/api/v1/admin/categories/c/invalidate", "")
	r.problem(t, http.StatusServiceUnavailable, "unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if n := in.metric(t, "shop_cache_errors_total", "op", "get"); n < 4 {
		t.Errorf("cache errors{op=get} = %v, want every read counted", n)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s with Redis down", d)
	}
}

// TestPostgresDown: what is cached is still served; what is not answers
// 503 with Retry-After, reads and writes alike, within seconds.
func TestPostgresDown(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	newInstance(t, st).create(t, "cached", "c", 1) // written through
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/shop?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st.db = pool
	in := newInstance(t, st)
	if p := in.do(t, http.MethodGet, "/api/v1/products/cached", "").product(t); p.SKU != "cached" {
		t.Errorf("cached product = %+v", p)
	}
	tests := []struct{ name, method, path, body string }{
		{"get_uncached", http.MethodGet, "/api/v1/products/other", ""},
		{"list", http.MethodGet, "/api/v1/products", ""},
		{"create", http.MethodPost, "/api/v1/admin/products", productJSON("new", "c", 1)},
		{"update", http.MethodPut, "/api/v1/admin/products/cached", `{"name":"x","description":"","category":"c","price_cents":2}`},
		{"delete", http.MethodDelete, "/api/v1/admin/products/cached", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := in.do(t, tc.method, tc.path, tc.body)
			r.problem(t, http.StatusServiceUnavailable, "unavailable")
			if r.header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	// The failed writes changed nothing in the cache either.
	if p := in.do(t, http.MethodGet, "/api/v1/products/cached", "").product(t); p.PriceCents != 1 {
		t.Errorf("cached product after failed writes = %+v", p)
	}
}
