package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// shop is a running server with an admin, for tests that sell things.
type shop struct {
	*server
	api   string
	admin string // the admin's access token
	watch *watch
}

// newShop starts `shop serve` (with its order writer) and makes an admin.
// Password hashing is the fast development kind, so that hundreds of
// shoppers can log in within seconds.
func newShop(t *testing.T, e env, args ...string) *shop {
	t.Helper()
	e["SHOP_ENV"] = "dev"
	e["SHOP_PASSWORD_HASHING"] = "fast"
	if _, stderr, err := runShop(t, e, "user", "add", "--email", "admin@shop.test", "--password", "admin-password", "--role", "admin"); err != nil {
		t.Fatalf("user add: %v %s", err, stderr)
	}
	s := startServer(t, e, args...)
	api := s.URL + "/api/v1"
	w := newWatch(t, e)
	w.process("shop serve", s.alive, nil)
	return &shop{server: s, api: api, admin: login(t, api, "admin@shop.test", "admin-password").AccessToken, watch: w}
}

// startServer starts another `shop serve` on the same stores, watched by
// the check.
func (s *shop) startServer(t *testing.T, args ...string) *server {
	t.Helper()
	other := startServer(t, s.watch.env, args...)
	s.watch.process("shop serve "+other.URL, other.alive, nil)
	return other
}

// product creates a product and opens a sale round for it; its live stock
// is sampled from then on, for the check.
func (s *shop) product(t *testing.T, sku string, price int64, seed map[string]any) {
	t.Helper()
	auth := []string{"Authorization", "Bearer " + s.admin}
	r := call(t, http.MethodPost, s.api+"/admin/products", map[string]any{
		"sku": sku, "name": "Product " + sku, "category": "e2e", "price_cents": price,
	}, auth...)
	if r.Status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", sku, r.Status, r.Body)
	}
	if r := call(t, http.MethodPut, s.api+"/admin/products/"+sku+"/stock", seed, auth...); r.Status != http.StatusOK {
		t.Fatalf("seed %s: %d %s", sku, r.Status, r.Body)
	}
	s.watch.sample(t, sku)
}

type stockReport struct {
	Quantity, Available, Sold, Confirmed int64
}

func (s *shop) stock(t *testing.T, sku string) stockReport {
	t.Helper()
	r := call(t, http.MethodGet, s.api+"/admin/products/"+sku+"/stock", nil, "Authorization", "Bearer "+s.admin)
	var rep stockReport
	r.JSON(t, &rep)
	return rep
}

// shoppers registers and logs in n shoppers, returning their tokens.
func (s *shop) shoppers(t *testing.T, n int, tag string) []string {
	t.Helper()
	out := make([]string, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			email := fmt.Sprintf("%s-%d@shop.test", tag, i)
			r := bulk(t, http.MethodPost, s.api+"/auth/register", map[string]string{"email": email, "password": "shopper-password"})
			if r.Status != http.StatusCreated {
				t.Errorf("register %s: %d %s", email, r.Status, r.Body)
				return
			}
			var tok tokens
			bulk(t, http.MethodPost, s.api+"/auth/login", map[string]string{"email": email, "password": "shopper-password"}).JSON(t, &tok)
			if tok.AccessToken == "" {
				t.Errorf("login %s failed", email)
			}
			out[i] = tok.AccessToken
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// waitConfirmed polls the stock until the writer has persisted every
// accepted unit.
func (s *shop) waitConfirmed(t *testing.T, sku string, want int64) stockReport {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rep := s.stock(t, sku)
		if rep.Confirmed == want || time.Now().After(deadline) {
			return rep
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type outcome struct {
	status  int
	code    string
	orderID string
	buyer   int
}

// purchase is one buy-now attempt.
func (s *shop) purchase(t *testing.T, token, sku string, qty int, key string) outcome {
	var body struct {
		OrderID string `json:"order_id"`
		Code    string `json:"code"`
	}
	sent := time.Now()
	r := bulk(t, http.MethodPost, s.api+"/products/"+sku+"/purchase", map[string]int{"quantity": qty},
		"Authorization", "Bearer "+token, "Idempotency-Key", key)
	r.JSON(t, &body)
	if r.Status >= 500 {
		s.watch.serverError(sent, r.Status, "purchase of "+sku+" ("+body.Code+")")
	}
	return outcome{status: r.Status, code: body.Code, orderID: body.OrderID}
}

// A few hundred buyers released together against the built binary: exactly
// the seeded units are accepted, none beyond the per-user limit, every 202
// becomes confirmed, and PostgreSQL's count matches Redis.
func TestFlashSaleOverHTTP(t *testing.T) {
	t.Parallel()
	s := newShop(t, newEnv(t))
	const units, buyers, tries = 100, 300, 2
	s.product(t, "flash-1", 999, map[string]any{"quantity": units, "per_user_limit": 1})
	tokens := s.shoppers(t, buyers, "flash")

	results := make(chan outcome, buyers*tries)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for b, tok := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range tries {
				o := s.purchase(t, tok, "flash-1", 1, "try-"+strconv.Itoa(i))
				o.buyer = b
				results <- o
			}
		}()
	}
	close(start)
	wg.Wait()
	close(results)

	accepted := map[string]int{} // order id → buyer
	perBuyer := map[int]int{}
	codes := map[string]int{}
	tally := newSale()
	for o := range results {
		tally.add(o.buyer, 1, o)
		switch {
		case o.status == http.StatusAccepted:
			if _, dup := accepted[o.orderID]; dup {
				t.Errorf("order id %s answered twice", o.orderID)
			}
			accepted[o.orderID] = o.buyer
			perBuyer[o.buyer]++
		case o.status == http.StatusConflict:
			codes[o.code]++
		default:
			t.Errorf("unexpected answer %d %s", o.status, o.code)
		}
	}
	if len(accepted) != units {
		t.Fatalf("accepted %d purchases of %d units (refusals %v)", len(accepted), units, codes)
	}
	for b, n := range perBuyer {
		if n > 1 {
			t.Fatalf("buyer %d got %d units, limit 1", b, n)
		}
	}
	rep := s.waitConfirmed(t, "flash-1", units)
	if rep.Sold != units || rep.Available != 0 || rep.Confirmed != units || rep.Quantity != units {
		t.Fatalf("stock after the sale: %+v", rep)
	}
	n := 0
	for id, b := range accepted {
		if n++; n > 25 {
			break // a sample; the confirmed count above covers them all
		}
		var o struct {
			Status     string `json:"status"`
			TotalCents int64  `json:"total_cents"`
		}
		call(t, http.MethodGet, s.api+"/orders/"+id, nil, "Authorization", "Bearer "+tokens[b]).JSON(t, &o)
		if o.Status != "confirmed" || o.TotalCents != 999 {
			t.Fatalf("order %s: %+v", id, o)
		}
	}
	s.check(t, "flash-1", units, 1, tally)
}
