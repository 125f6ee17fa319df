package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
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

// With --cache-redis-url (SHOP_CACHE_REDIS_URL) the catalog cache lives in
// its own Redis, which may evict: no cache key lands in the main Redis,
// nothing else lands in the cache's, and reads still follow writes.
func TestCatalogCacheInItsOwnRedis(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cacheURL := testenv.RedisServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	s := newShop(t, e, "--cache-redis-url", cacheURL)
	auth := []string{"Authorization", "Bearer " + s.admin}
	for _, sku := range []string{"c-1", "c-2", "c-3"} {
		r := call(t, http.MethodPost, s.api+"/admin/products", map[string]any{
			"sku": sku, "name": "Product " + sku, "category": "split", "price_cents": 100,
		}, auth...)
		if r.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", sku, r.Status, r.Body)
		}
	}
	for _, path := range []string{"/products/c-1", "/products/c-2", "/products?category=split", "/products?limit=2", "/products?category=none"} {
		if r := call(t, http.MethodGet, s.api+path, nil); r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	r := call(t, http.MethodPut, s.api+"/admin/products/c-1", map[string]any{
		"name": "Renamed", "description": "", "category": "split", "price_cents": 250,
	}, auth...)
	if r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	var p struct {
		PriceCents int64 `json:"price_cents"`
	}
	call(t, http.MethodGet, s.api+"/products/c-1", nil).JSON(t, &p)
	if p.PriceCents != 250 {
		t.Fatalf("read after write = %d, want 250", p.PriceCents)
	}

	prefix := e["SHOP_KEY_PREFIX"]
	main, cache := redisKeys(t, e["SHOP_REDIS_URL"], prefix), redisKeys(t, cacheURL, "")
	for _, k := range main {
		if strings.HasPrefix(k, prefix+"cache:") {
			t.Errorf("cache key %s in the main Redis", k)
		}
	}
	if len(main) == 0 {
		t.Error("the main Redis holds nothing: sessions went elsewhere")
	}
	if len(cache) == 0 {
		t.Error("the cache Redis holds nothing")
	}
	for _, k := range cache {
		if !strings.HasPrefix(k, prefix+"cache:") {
			t.Errorf("%s, not a cache key, in the cache Redis", k)
		}
	}
}

// redisKeys lists the keys starting with prefix (SCAN, never KEYS).
func redisKeys(t *testing.T, url, prefix string) []string {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	var keys []string
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}
