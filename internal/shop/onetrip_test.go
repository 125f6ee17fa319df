package shop_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// The one-trip purchase (internal/onetrip): on one Redis, with the limiter on, a
// purchase's limiter window, session check and reservation run in one
// script call, and every answer and count is what the separate steps gave.

// oneTrip is an app limiting every client to limit requests a minute,
// whose Redis client counts the scripts it runs (pipelineSpy).
func oneTrip(t *testing.T, limit int) (*shoptest.App, *pipelineSpy) {
	t.Helper()
	return spiedApp(t, config.RateLimit{Limit: limit, Window: time.Minute})
}

// spiedApp is an app with the rate limit rl whose Redis client counts the
// scripts it runs (pipelineSpy); the app's Redis field is the test's own.
func spiedApp(t *testing.T, rl config.RateLimit) (*shoptest.App, *pipelineSpy) {
	t.Helper()
	stores := shoptest.NewStores(t)
	spy := &pipelineSpy{prefix: stores.Redis.Prefix}
	rdb := redis.NewClient(stores.Redis.Client.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(spy)
	a := shoptest.New(t, shoptest.Options{Stores: stores, Redis: rdb, Config: func(c *config.Config) {
		c.RateLimit = rl
	}})
	return a, spy
}

// tally is what the test's Redis holds of the purchases: the sale's units
// left, the order events and statuses, and the requests the limiter
// counted (every client's window).
type tally struct {
	available, events, statuses, counted int64
}

func tallyOf(t *testing.T, a *shoptest.App, sku string) tally {
	t.Helper()
	ctx := context.Background()
	rdb, p := a.Redis.Client, a.Redis.Prefix
	var n tally
	var err error
	if n.available, err = rdb.HGet(ctx, a.Stock.SaleKey(sku), "available").Int64(); err != nil {
		t.Fatal(err)
	}
	n.events = rdb.XLen(ctx, p+"orders").Val()
	n.statuses = int64(len(scan(t, rdb, p+"order:*")))
	for _, k := range scan(t, rdb, p+"rl:*") {
		n.counted += rdb.ZCard(ctx, k).Val()
	}
	return n
}

func scan(t *testing.T, rdb redis.UniversalClient, match string) []string {
	t.Helper()
	var keys []string
	iter := rdb.Scan(context.Background(), 0, match, 100).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

func wantTally(t *testing.T, got, want tally) {
	t.Helper()
	if got != want {
		t.Fatalf("Redis holds %+v, want %+v", got, want)
	}
}

func purchase(t *testing.T, a *shoptest.App, token, body string, headers ...string) openapitest.Reply {
	t.Helper()
	return a.Do(t, http.MethodPost, "/api/v1/products/ot/purchase", token, body, headers...)
}

// A purchase over the limit gets 429 with Retry-After before anything
// else (a bad body, a revoked session) and reserves nothing; it is not
// counted.
func TestOneTripLimitedPurchaseReservesNothing(t *testing.T) {
	t.Parallel()
	a, _ := oneTrip(t, 2)
	a.Sale(t, "ot", 100, 10, 0)
	_, token := a.Shopper(t, "ot-limited@example.com")
	for range 2 {
		shoptest.WantStatus(t, a.Do(t, http.MethodGet, "/api/v1/me", token, ""), http.StatusOK)
	}
	for _, body := range []string{`{"quantity":1}`, `{"quantity":0}`, `not json`} {
		r := purchase(t, a, token, body, "Idempotency-Key", "k-"+body)
		openapitest.WantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
		if r.Header.Get("X-RateLimit-Remaining") != "0" || r.Header.Get("X-RateLimit-Limit") != "2" {
			t.Fatalf("429 headers: %v", r.Header)
		}
	}
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 10, counted: 2})
}

// A purchase with a revoked session gets 401 and reserves nothing, even
// with a bad body (the session is checked before the body, as before); it
// counts against the limit like any allowed request.
func TestOneTripRevokedSessionReservesNothing(t *testing.T) {
	t.Parallel()
	a, spy := oneTrip(t, 100)
	a.Sale(t, "ot", 100, 10, 0)
	_, token := a.Shopper(t, "ot-revoked@example.com")
	shoptest.WantStatus(t, a.Do(t, http.MethodPost, "/api/v1/auth/logout", token, ""), http.StatusNoContent)
	for _, body := range []string{`{"quantity":1}`, `{"quantity":0}`} {
		r := purchase(t, a, token, body, "Idempotency-Key", "k")
		openapitest.WantProblem(t, r, http.StatusUnauthorized, "unauthorized")
		if r.Header.Get("X-RateLimit-Limit") != "100" {
			t.Fatalf("401 without the limiter's headers: %v", r.Header)
		}
	}
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 10, counted: 3})
	// The well-formed purchase made the one combined call, which refused.
	if spy.combined.Load() != 1 {
		t.Fatalf("combined calls %d, want 1", spy.combined.Load())
	}
}

// With the limiter off (SHOP_RATE_LIMIT=0) a purchase is still one script
// call, its session check with its reservation: nothing is counted, no
// X-RateLimit header is sent, and a revoked session gets 401 having
// reserved nothing.
func TestOneTripWithTheLimiterOff(t *testing.T) {
	t.Parallel()
	a, spy := spiedApp(t, config.RateLimit{})
	a.Sale(t, "ot", 100, 10, 0)
	_, token := a.Shopper(t, "ot-off@example.com")
	_, revoked := a.Shopper(t, "ot-off-revoked@example.com")
	shoptest.WantStatus(t, a.Do(t, http.MethodPost, "/api/v1/auth/logout", revoked, ""), http.StatusNoContent)
	r := purchase(t, a, token, `{"quantity":2}`, "Idempotency-Key", "off")
	shoptest.WantStatus(t, r, http.StatusAccepted)
	openapitest.WantProblem(t, purchase(t, a, revoked, `{"quantity":1}`, "Idempotency-Key", "off"),
		http.StatusUnauthorized, "unauthorized")
	for _, r := range []openapitest.Reply{r, a.Do(t, http.MethodGet, "/api/v1/me", token, "")} {
		if h := r.Header.Get("X-RateLimit-Limit") + r.Header.Get("X-RateLimit-Remaining"); h != "" {
			t.Fatalf("the limiter off sent X-RateLimit headers: %v", r.Header)
		}
	}
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 8, events: 1, statuses: 1})
	// A limiter that decides nothing counts no decision.
	res, err := a.Fiber.Test(httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || strings.Contains(string(metrics), "shop_ratelimit_decisions_total") {
		t.Fatalf("/metrics %d with the limiter off counts rate-limit decisions", res.StatusCode)
	}
	spy.wantCombinedOnly(t, 2)
}

// wantCombinedOnly checks that the one-trip script ran n times and
// neither the reservation nor the limiter ran alone.
func (s *pipelineSpy) wantCombinedOnly(t *testing.T, n int64) {
	t.Helper()
	if s.combined.Load() != n || s.reserve.Load() != 0 || s.limiter.Load() != 0 {
		t.Fatalf("scripts: combined %d, reserve alone %d, limiter alone %d; want %d, 0, 0",
			s.combined.Load(), s.reserve.Load(), s.limiter.Load(), n)
	}
}

// A purchase reserves exactly once, in one script call: a repeat with its
// Idempotency-Key answers the same order and reserves nothing more, and
// each request is counted once.
func TestOneTripPurchaseReservesOnce(t *testing.T) {
	t.Parallel()
	a, spy := oneTrip(t, 100)
	a.Sale(t, "ot", 100, 10, 0)
	_, token := a.Shopper(t, "ot-once@example.com")
	var first string
	for i := range 2 {
		r := purchase(t, a, token, `{"quantity":2}`, "Idempotency-Key", "once")
		shoptest.WantStatus(t, r, http.StatusAccepted)
		id, _ := r.JSON(t)["order_id"].(string)
		if i == 0 {
			first = id
		}
		if id == "" || id != first {
			t.Fatalf("purchase %d: order %q, want %q", i, id, first)
		}
		if got := r.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(99-i) {
			t.Fatalf("purchase %d: X-RateLimit-Remaining %s, want %d", i, got, 99-i)
		}
	}
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 8, events: 1, statuses: 1, counted: 2})
	spy.wantCombinedOnly(t, 2)
}

// A purchase refused before its reservation (a bad body, a bad SKU, no
// token) is counted once, by the check run alone, and answered as before.
func TestOneTripRefusedBeforeReservingCountsOnce(t *testing.T) {
	t.Parallel()
	a, spy := oneTrip(t, 100)
	a.Sale(t, "ot", 100, 10, 0)
	_, token := a.Shopper(t, "ot-bad@example.com")
	openapitest.WantProblem(t, purchase(t, a, token, `{"quantity":0}`), http.StatusBadRequest, "invalid_request")
	openapitest.WantProblem(t, purchase(t, a, token, `{"quantity":1}`, "Idempotency-Key", "bad key"), http.StatusBadRequest, "invalid_request")
	openapitest.WantProblem(t, purchase(t, a, "", `{"quantity":1}`), http.StatusUnauthorized, "unauthorized")
	openapitest.WantProblem(t, a.Do(t, http.MethodPost, "/api/v1/products/no-such/purchase", token, `{"quantity":1}`),
		http.StatusNotFound, "not_found")
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 10, counted: 4})
	if spy.combined.Load() != 1 { // the unknown SKU's: reserve.lua says no sale
		t.Fatalf("combined calls %d, want 1", spy.combined.Load())
	}
}

// Shoppers released together from one address, more than its limit and
// than the stock: exactly `limit` are let through, of which exactly the
// stock is sold, and the others get 429 having reserved nothing.
func TestOneTripRaceExactTotals(t *testing.T) {
	t.Parallel()
	const limit, units, shoppers = 50, 30, 90
	a, spy := oneTrip(t, limit)
	a.Sale(t, "ot", 100, units, 1)
	tokens := make([]string, shoppers)
	for i := range tokens {
		_, tokens[i] = a.Shopper(t, fmt.Sprintf("ot-race%d@example.com", i))
	}
	base := a.Serve(t)
	got := burst(t, shoppers, "purchase", []int{http.StatusAccepted, http.StatusConflict, http.StatusTooManyRequests},
		func(i int) *http.Request { return purchaseRequest(base, "ot", tokens[i]) })
	accepted, soldOut, limited := got[http.StatusAccepted], got[http.StatusConflict], got[http.StatusTooManyRequests]
	if accepted != units || soldOut != limit-units || limited != shoppers-limit {
		t.Fatalf("accepted %d, sold out %d, limited %d; want %d, %d, %d",
			accepted, soldOut, limited, units, limit-units, shoppers-limit)
	}
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 0, events: units, statuses: units, counted: limit})
	if spy.combined.Load() < shoppers {
		t.Fatalf("combined calls %d, want one per purchase (%d)", spy.combined.Load(), shoppers)
	}
}

// burst sends n requests at once, req(i) the i-th, and counts the
// replies by status; a request that fails, or a status not in want, fails
// the test (what names the request in the message).
func burst(t *testing.T, n int, what string, want []int, req func(i int) *http.Request) map[int]int64 {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int64{}
	var wg sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			res, err := http.DefaultClient.Do(req(i))
			if err != nil {
				errs <- err
				return
			}
			_ = res.Body.Close()
			if !slices.Contains(want, res.StatusCode) {
				errs <- fmt.Errorf("%s %d: status %d", what, i, res.StatusCode)
				return
			}
			mu.Lock()
			counts[res.StatusCode]++
			mu.Unlock()
		}()
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return counts
}

// purchaseRequest buys one unit of sku at the server at base.
func purchaseRequest(base, sku, token string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/products/"+sku+"/purchase", strings.NewReader(`{"quantity":1}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// cartOf is how many lines the user's cart holds.
func cartOf(t *testing.T, a *shoptest.App, user string) int64 {
	t.Helper()
	return a.Redis.Client.HLen(context.Background(), a.Redis.Prefix+"cart:{"+user+"}").Val()
}

func checkout(t *testing.T, a *shoptest.App, token string, headers ...string) openapitest.Reply {
	t.Helper()
	return a.Do(t, http.MethodPost, "/api/v1/cart/checkout", token, "", headers...)
}

// A checkout's window, session check and reservation also run in one call:
// it reserves once and empties the cart; a repeat with its key replays the
// order only after the check; over the limit it gets 429 and with a
// revoked session 401, reserving nothing and leaving the cart as it was.
func TestOneTripCheckout(t *testing.T) {
	t.Parallel()
	a, spy := oneTrip(t, 6)
	a.Sale(t, "ot", 100, 10, 0)
	buyer, token := a.Shopper(t, "ot-checkout@example.com")
	add := func(tok string) {
		shoptest.WantStatus(t, a.Do(t, http.MethodPost, "/api/v1/cart/items", tok, `{"sku":"ot","quantity":3}`), http.StatusOK)
	}
	add(token)                                          // 1
	r := checkout(t, a, token, "Idempotency-Key", "co") // 2
	shoptest.WantStatus(t, r, http.StatusAccepted)
	id, _ := r.JSON(t)["order_id"].(string)
	replay := checkout(t, a, token, "Idempotency-Key", "co") // 3: the cart is empty, the key's order answers
	shoptest.WantStatus(t, replay, http.StatusAccepted)
	if got, _ := replay.JSON(t)["order_id"].(string); got != id || id == "" {
		t.Fatalf("replay answered order %q, want %q", got, id)
	}
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 7, events: 1, statuses: 1, counted: 3})
	if n := cartOf(t, a, buyer); n != 0 || spy.combined.Load() != 1 {
		t.Fatalf("after checkout: cart %d lines, combined calls %d; want 0 and 1", n, spy.combined.Load())
	}

	// A revoked session: 401, the cart kept.
	other, token2 := a.Shopper(t, "ot-checkout2@example.com")
	add(token2)                                                                                                           // 4
	shoptest.WantStatus(t, a.Do(t, http.MethodPost, "/api/v1/auth/logout", token2, ""), http.StatusNoContent)             // 5
	openapitest.WantProblem(t, checkout(t, a, token2, "Idempotency-Key", "co2"), http.StatusUnauthorized, "unauthorized") // 6
	// Over the limit (6 a minute): 429 first, for the live session's
	// replay and for the revoked one alike.
	openapitest.WantProblem(t, checkout(t, a, token, "Idempotency-Key", "co"), http.StatusTooManyRequests, "rate_limited")
	openapitest.WantProblem(t, checkout(t, a, token2, "Idempotency-Key", "co2"), http.StatusTooManyRequests, "rate_limited")
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 7, events: 1, statuses: 1, counted: 6})
	if n := cartOf(t, a, other); n != 1 {
		t.Fatalf("refused checkouts left %d cart lines, want 1", n)
	}
}

// A purchase of a round with a waiting room is judged in the one trip
// too: without the pass 403 pass_required, reserving nothing but counted
// by the limiter; with it, bought.
func TestOneTripPurchaseNeedsThePass(t *testing.T) {
	t.Parallel()
	a, spy := oneTrip(t, 100)
	round := a.RoomSale(t, "ot", 100, 10, 0)
	u, token := a.Shopper(t, "ot-pass@example.com")
	pass := a.Admit(t, "ot", u, round)
	openapitest.WantProblem(t, purchase(t, a, token, `{"quantity":2}`), http.StatusForbidden, "pass_required")
	openapitest.WantProblem(t, purchase(t, a, token, `{"quantity":2}`, "X-Queue-Pass", "x"+pass), http.StatusForbidden, "pass_required")
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 10, counted: 2})
	shoptest.WantStatus(t, purchase(t, a, token, `{"quantity":2}`, "X-Queue-Pass", pass), http.StatusAccepted)
	wantTally(t, tallyOf(t, a, "ot"), tally{available: 8, events: 1, statuses: 1, counted: 3})
	if spy.combined.Load() != 3 || spy.reserve.Load() != 0 {
		t.Fatalf("scripts: combined %d, reserve alone %d; want 3, 0", spy.combined.Load(), spy.reserve.Load())
	}
}
