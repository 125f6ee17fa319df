package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/testenv"
)

// Redis stalls (SIGSTOP: connections stay open, nothing answers). Every
// answer comes within the bound the database package documents for its
// route, with the rate limiter on (its 1 s check comes first; writes fail
// closed there) and off: each Redis call is cut at its own timeout rather
// than at go-redis's 2 s read timeout. Writes are refused 503, catalog
// reads still answer from PostgreSQL, authenticated reads 503 (an outage
// is not a logout). The assertion allows twice each bound, for a loaded
// machine: each answer comes at its bound to within milliseconds, and
// three times would not tell a catalog page cut at its timeouts (2 s
// without the limiter) from one cut at go-redis's read timeout (6 s).
// Then the refused purchase is repeated with its key, and the drill ends
// with the full invariant check (I1–I6).
func TestDrillRedisStalled(t *testing.T) {
	t.Parallel()
	type bounds struct{ purchase, login, me, product, catalog time.Duration }
	for _, c := range []struct {
		name, limit string
		bounds
	}{
		{"limiter_on", "100/10s", bounds{time.Second, time.Second, 3 * time.Second, 2500 * time.Millisecond, 3 * time.Second}},
		{"limiter_off", "0", bounds{2 * time.Second, 2 * time.Second, 2 * time.Second, 1500 * time.Millisecond, 2 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.bounds
			stalled(t, c.limit, map[string]time.Duration{
				"purchase": b.purchase, "login": b.login, "me": b.me, "product": b.product, "catalog": b.catalog,
			})
		})
	}
}

// stalled runs the routes against a shop whose Redis is paused.
func stalled(t *testing.T, limit string, bound map[string]time.Duration) {
	rs := testenv.StartRedis(t, "--maxmemory-policy", "noeviction")
	e := newEnv(t)
	e["SHOP_REDIS_URL"], e["SHOP_RATE_LIMIT"] = rs.URL, limit
	s := newShop(t, e)
	s.product(t, "stall-1", 100, map[string]any{"quantity": 10})
	token := s.shoppers(t, 1, "stall")[0]
	bearer := []string{"Authorization", "Bearer " + token}

	endFault := s.watch.fault(2 * time.Second)
	rs.Pause(t)
	tests := []struct {
		name, method, path string
		body               any
		headers            []string
		status             int
	}{
		{"purchase", http.MethodPost, "/products/stall-1/purchase", map[string]int{"quantity": 1},
			append([]string{"Idempotency-Key", "stall"}, bearer...), http.StatusServiceUnavailable},
		{"login", http.MethodPost, "/auth/login", map[string]string{"email": "stall-0@shop.test", "password": "shopper-password"},
			nil, http.StatusServiceUnavailable},
		{"me", http.MethodGet, "/me", nil, bearer, http.StatusServiceUnavailable},
		{"product", http.MethodGet, "/products/stall-1", nil, nil, http.StatusOK},
		{"catalog", http.MethodGet, "/products?category=e2e", nil, nil, http.StatusOK},
	}
	for _, tc := range tests {
		start := time.Now()
		r := call(t, tc.method, s.api+tc.path, tc.body, tc.headers...)
		d := time.Since(start)
		t.Logf("%s: %d after %s (bound %s)", tc.name, r.Status, d.Round(time.Millisecond), bound[tc.name])
		if r.Status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.Status, r.Body, tc.status)
		}
		if tc.status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", tc.name)
		}
		if r.Status >= 500 {
			s.watch.serverError(start, r.Status, tc.name)
		}
		if d > 2*bound[tc.name] {
			t.Errorf("%s: took %s with Redis stalled, want under %s", tc.name, d, 2*bound[tc.name])
		}
	}
	rs.Resume(t)
	endFault()
	if r := me(t, s.api, token); r.Status != http.StatusOK {
		t.Errorf("after the stall: /me = %d %s; the stall logged the shopper out", r.Status, r.Body)
	}
	// The purchase refused during the stall, repeated with its key as
	// API.md tells clients: it is bought once (if its script reached Redis
	// and ran when Redis woke, the repeat answers that order), and the
	// drill ends with the full invariant check.
	tally := newSale()
	o := buyRepeating(t, s, token, "stall-1", "stall")
	tally.add(0, 1, o)
	if o.status != http.StatusAccepted {
		t.Fatalf("the purchase repeated after the stall: %d %s", o.status, o.code)
	}
	s.waitConfirmed(t, "stall-1", 1)
	s.check(t, "stall-1", 10, 0, tally)
}

// buyRepeating makes one purchase with Idempotency-Key key, repeated while
// the answer is 503 (30 s at most), and returns the first other answer.
func buyRepeating(t *testing.T, s *shop, token, sku, key string) outcome {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if o := s.purchase(t, token, sku, 1, key); o.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return o
		}
	}
}
