package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The limiter on, as in production, behind a trusted proxy: each shopper's
// address has its own window. Three shoppers fire 60 purchases each at
// once with room for 40 each (120 > the 100 units): exactly 100 are
// accepted, 20 find the stock gone, and the 60 over the limit get 429 and
// buy nothing. The session check rides in the limiter's script, so a
// logout still stops the token at once.
func TestRateLimitedSale(t *testing.T) {
	t.Parallel()
	const (
		limit    = 40
		shoppers = 3
		attempts = 60
		units    = 100
	)
	e := newEnv(t)
	e["SHOP_RATE_LIMIT"] = strconv.Itoa(limit) + "/1m"
	e["SHOP_TRUSTED_PROXIES"] = "127.0.0.1"
	s := newShop(t, e) // its setup requests count against 127.0.0.1
	s.product(t, "RL-1", 500, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, shoppers, "rl")
	addr := func(i int) string { return fmt.Sprintf("203.0.113.%d", i+1) }

	var mu sync.Mutex
	got := map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range shoppers {
		for a := range attempts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r := bulk(t, http.MethodPost, s.api+"/products/RL-1/purchase", map[string]int{"quantity": 1},
					"Authorization", "Bearer "+tokens[i], "X-Forwarded-For", addr(i),
					"Idempotency-Key", fmt.Sprintf("rl-%d-%d", i, a))
				var p struct{ Code string }
				r.JSON(t, &p)
				if r.Status == http.StatusTooManyRequests && r.Header.Get("Retry-After") == "" {
					p.Code += " without Retry-After"
				}
				mu.Lock()
				got[strconv.Itoa(r.Status)+" "+p.Code]++
				mu.Unlock()
			}()
		}
	}
	close(start)
	wg.Wait()
	want := map[string]int{"202 ": units, "409 out_of_stock": shoppers*limit - units, "429 rate_limited": shoppers * (attempts - limit)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers %v, want %v", got, want)
	}

	// The admin reads the stock from addresses of its own, so the polling
	// cannot run into the limit.
	var rep stockReport
	for poll := 0; ; poll++ {
		r := call(t, http.MethodGet, s.api+"/admin/products/RL-1/stock", nil,
			"Authorization", "Bearer "+s.admin, "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", poll%250+1))
		r.JSON(t, &rep)
		if rep.Confirmed == units || poll == 300 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rep.Sold != units || rep.Available != 0 || rep.Confirmed != units {
		t.Fatalf("stock %+v, want %d sold and confirmed", rep, units)
	}
	if rows, _, distinct := orderRows(t, e["SHOP_DATABASE_URL"], "RL-1"); rows != units || distinct != units {
		t.Fatalf("PostgreSQL holds %d rows (%d distinct), want %d", rows, distinct, units)
	}

	// Logout from a fresh address; the token is refused at once, elsewhere too.
	fresh := func(n int) []string {
		return []string{"Authorization", "Bearer " + tokens[0], "X-Forwarded-For", fmt.Sprintf("192.0.2.%d", n)}
	}
	if r := call(t, http.MethodGet, s.api+"/me", nil, fresh(1)...); r.Status != http.StatusOK {
		t.Fatalf("GET /me = %d %s", r.Status, r.Body)
	}
	if r := call(t, http.MethodPost, s.api+"/auth/logout", nil, fresh(2)...); r.Status != http.StatusNoContent {
		t.Fatalf("logout = %d %s", r.Status, r.Body)
	}
	if r := call(t, http.MethodGet, s.api+"/me", nil, fresh(3)...); r.Status != http.StatusUnauthorized {
		t.Fatalf("GET /me after logout = %d %s, want 401", r.Status, r.Body)
	}
}
