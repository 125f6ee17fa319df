package livetest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// wait bounds every expected event: generous for a loaded 2-core machine,
// yet the promise is "within a second", and is measured in e2e.
const wait = 10 * time.Second

var client = &http.Client{}

func open(t *testing.T, base, sku string) *openapitest.Stream {
	t.Helper()
	return openapitest.OpenStream(t, client, base+"/api/v1/products/"+sku+"/events")
}

func first(t *testing.T, s *openapitest.Stream) openapitest.StockEvent {
	t.Helper()
	e, ok := s.Next(wait)
	if !ok {
		t.Fatal("no first event")
	}
	return e
}

func buy(t *testing.T, a *shoptest.App, token, sku string, qty int) {
	t.Helper()
	r := a.Do(t, http.MethodPost, "/api/v1/products/"+sku+"/purchase", token, fmt.Sprintf(`{"quantity":%d}`, qty))
	if r.Status != http.StatusAccepted {
		t.Fatalf("purchase: %d %s", r.Status, r.Body)
	}
}

// The first event is the live state; each purchase is streamed; the last
// unit sold shows sold_out; a product without stock shows none; an
// unknown SKU is 404.
func TestStreamFollowsPurchases(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	base := a.Serve(t)
	a.Sale(t, "p1", 100, 5, 0)
	a.Product(t, "bare", 100)
	_, tok := a.Shopper(t, "s@shop.test")

	s := open(t, base, "p1")
	if e := first(t, s); e.Available != 5 || e.Sale != "open" || e.StartsAt != nil || e.EndsAt != nil {
		t.Fatalf("first event %+v, want 5 open", e)
	}
	buy(t, a, tok, "p1", 2)
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 3 && e.Sale == "open" }); !ok {
		t.Fatal("the purchase was not streamed")
	}
	buy(t, a, tok, "p1", 3)
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 0 && e.Sale == "sold_out" }); !ok {
		t.Fatal("the sell-out was not streamed")
	}
	if e := first(t, open(t, base, "bare")); e.Sale != "none" || e.Available != 0 {
		t.Fatalf("product without stock: %+v", e)
	}
	openapitest.WantProblem(t, a.Do(t, http.MethodGet, "/api/v1/products/nope/events", "", ""), 404, "not_found")
	openapitest.WantProblem(t, a.Do(t, http.MethodGet, "/api/v1/products/bad%20sku/events", "", ""), 404, "not_found")
}

// A round split over 4 stock buckets streams the round's units, not a
// bucket's: each purchase (from the buyer's home bucket) and each cancel
// (back to bucket 0) is followed by the round's sum, down to the sell-out.
func TestStreamFollowsABucketedRound(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	base := a.Serve(t)
	a.Product(t, "split", 100)
	a.Round(t, "split", inventory.Seed{Quantity: 8, Buckets: 4})
	s := open(t, base, "split")
	if e := first(t, s); e.Available != 8 {
		t.Fatalf("first event %+v, want 8", e)
	}
	var last string
	for i := range 8 {
		user, tok := a.Shopper(t, fmt.Sprintf("b%d@shop.test", i))
		r := a.Do(t, http.MethodPost, "/api/v1/products/split/purchase", tok, `{"quantity":1}`)
		if r.Status != http.StatusAccepted {
			t.Fatalf("purchase %d: %d %s", i+1, r.Status, r.Body)
		}
		if i == 0 {
			if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 7 }); !ok {
				t.Fatal("the first purchase was not streamed as 7 of the round's units")
			}
			a.Cancel(t, user, r.JSON(t)["order_id"].(string))
			if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 8 }); !ok {
				t.Fatal("the cancel was not streamed as 8 of the round's units")
			}
		}
		last = tok
	}
	buy(t, a, last, "split", 1)
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 0 && e.Sale == "sold_out" }); !ok {
		t.Fatal("the sell-out was not streamed")
	}
}

// Every event of a round states its per-shopper limit: the first (read
// from the live state), a purchase's (the reserve script's), a cancel's
// (the release script's); none without a sale.
func TestStreamStatesTheLimit(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	base := a.Serve(t)
	a.Sale(t, "limited", 100, 5, 3)
	a.Sale(t, "unlimited", 100, 5, 0)
	a.Product(t, "bare", 100)
	_, tok := a.Shopper(t, "limit@shop.test")
	limit := func(e openapitest.StockEvent) int64 {
		if e.PerUserLimit == nil {
			return -1
		}
		return *e.PerUserLimit
	}

	s := open(t, base, "limited")
	if e := first(t, s); limit(e) != 3 {
		t.Fatalf("first event %+v: limit %d, want 3", e, limit(e))
	}
	var placed struct {
		OrderID string `json:"order_id"`
	}
	a.Do(t, http.MethodPost, "/api/v1/products/limited/purchase", tok, `{"quantity":2}`).Decode(t, http.StatusAccepted, &placed)
	if e, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 3 }); !ok || limit(e) != 3 {
		t.Fatalf("the purchase's event %+v (%v): want the limit 3", e, ok)
	}
	a.Drain(t)
	a.Do(t, http.MethodPost, "/api/v1/orders/"+placed.OrderID+"/cancel", tok, "").Decode(t, http.StatusOK, &map[string]any{})
	if e, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 5 }); !ok || limit(e) != 3 {
		t.Fatalf("the cancel's event %+v (%v): want the limit 3", e, ok)
	}
	if e := first(t, open(t, base, "unlimited")); limit(e) != 0 {
		t.Errorf("no limit: %+v, want per_user_limit 0", e)
	}
	if e := first(t, open(t, base, "bare")); e.PerUserLimit != nil {
		t.Errorf("no sale: %+v, want no per_user_limit", e)
	}
}

// An upcoming sale turns open at starts_at with no purchase: the server
// schedules that event; and ends at ends_at.
func TestStreamOpensAndEndsOnTime(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	base := a.Serve(t)
	a.Product(t, "soon", 100)
	starts := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	ends := starts.Add(1500 * time.Millisecond)
	a.Round(t, "soon", inventory.Seed{Quantity: 4, StartsAt: starts, EndsAt: ends})

	s := open(t, base, "soon")
	if e := first(t, s); e.Sale != "upcoming" || e.StartsAt == nil || !e.StartsAt.Equal(starts) {
		t.Fatalf("first event %+v, want upcoming from %s", e, starts)
	}
	e, ok := s.Next(wait)
	if !ok || e.Sale != "open" || e.Available != 4 {
		t.Fatalf("at starts_at: %+v %v, want open", e, ok)
	}
	if e.At.Before(starts) {
		t.Errorf("opened at %s, before starts_at %s", e.At, starts)
	}
	if e, ok = s.Next(wait); !ok || e.Sale != "ended" || e.At.Before(ends) {
		t.Fatalf("at ends_at: %+v %v, want ended after %s", e, ok, ends)
	}
}

// A new round (seeding) and a deleted product are streamed too.
func TestStreamFollowsSeedingAndDeletion(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	base := a.Serve(t)
	a.Sale(t, "p1", 100, 1, 0)
	s := open(t, base, "p1")
	first(t, s)
	a.Round(t, "p1", inventory.Seed{Quantity: 9})
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 9 }); !ok {
		t.Fatal("the new round was not streamed")
	}
	if err := a.Catalog.Delete(context.Background(), "p1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Sale == "none" }); !ok {
		t.Fatal("the deletion was not streamed")
	}
}

// A stream says whether the round is a draw: a seeding's message does
// not (its format is the one an older instance reads), so the hub reads
// the seeded round again; a plain round after it says no again.
func TestStreamSaysWhichRoundIsADraw(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	base := a.Serve(t)
	a.Sale(t, "p1", 100, 1, 0)
	s := open(t, base, "p1")
	if e := first(t, s); e.Draw {
		t.Fatalf("a plain round streamed as a draw: %+v", e)
	}
	a.Round(t, "p1", inventory.Seed{Quantity: 4, Draw: &inventory.DrawSettings{ClosesAt: time.Now().Add(time.Hour)}})
	if e, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 4 }); !ok || !e.Draw {
		t.Fatalf("the draw round streamed as %+v (%v), want a draw", e, ok)
	}
	a.Round(t, "p1", inventory.Seed{Quantity: 7})
	if e, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 7 }); !ok || e.Draw {
		t.Fatalf("the plain round after it streamed as %+v (%v)", e, ok)
	}
}

// Streams are limited per client IP (429) and in total (503), each
// refusal counted; a closed stream frees its place. The clients are told
// apart by the addresses a trusted proxy forwards.
func TestStreamLimits(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{Config: func(c *config.Config) {
		c.LiveMaxStreams, c.LiveMaxStreamsPerIP = 2, 1
		c.TrustedProxies = []string{"127.0.0.1"}
	}})
	base := a.Serve(t)
	a.Sale(t, "p1", 100, 5, 0)
	url := base + "/api/v1/products/p1/events"
	from := func(ip string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Forwarded-For", ip)
		r, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r
	}
	s1 := openapitest.OpenStream(t, client, url, "X-Forwarded-For", "10.0.0.1")
	if r := from("10.0.0.1"); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("second stream of one client: %d, Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	openapitest.OpenStream(t, client, url, "X-Forwarded-For", "10.0.0.2")
	if r := from("10.0.0.3"); r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a stream over the total: %d, Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	refused := func(reason string) float64 { return metric(t, a, "shop_live_streams_refused_total", reason) }
	if refused("per_client") != 1 || refused("total") != 1 {
		t.Errorf("refusals counted: per_client %v, total %v; want 1 and 1", refused("per_client"), refused("total"))
	}
	s1.Close()
	waitFor(t, func() bool { return metric(t, a, "shop_live_streams", "") == 1 })
	openapitest.OpenStream(t, client, url, "X-Forwarded-For", "10.0.0.3") // a place is free again
}

// Shutdown tells every stream to reconnect and closes it, so the HTTP
// server's graceful shutdown does not wait on it; new streams are refused.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	base := a.Serve(t)
	a.Sale(t, "p1", 100, 5, 0)
	var streams []*openapitest.Stream
	for range 5 {
		s := open(t, base, "p1")
		first(t, s)
		streams = append(streams, s)
	}
	a.StopStreams()
	for _, s := range streams {
		retries, clean := s.Ended(wait)
		if !clean || len(retries) < 2 {
			t.Fatalf("stream after shutdown: clean end %v, retry fields %v", clean, retries)
		}
	}
	start := time.Now()
	if err := a.Fiber.ShutdownWithTimeout(wait); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("HTTP shutdown took %s with the streams closed", d)
	}
}

// Keep-alive comments are sent while nothing changes, and a stream
// outlives the server's write timeout (10 s, which fasthttp sets once for
// the whole response): a purchase after it is still streamed.
func TestStreamKeepAliveAndLongLife(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a keep-alive")
	}
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	base := a.Serve(t)
	a.Sale(t, "p1", 100, 5, 0)
	_, tok := a.Shopper(t, "s@shop.test")
	s := open(t, base, "p1")
	first(t, s)
	waitFor(t, func() bool { return s.Comments() > 0 })
	time.Sleep(time.Second) // past the write timeout for sure
	buy(t, a, tok, "p1", 1)
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 4 }); !ok {
		t.Fatal("a purchase after the write timeout was not streamed")
	}
}

// Many streams of one SKU all see the final state after a burst of
// purchases.
func TestManyStreamsSeeTheSellOut(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{Config: func(c *config.Config) { c.LiveMaxStreamsPerIP = 200 }})
	base := a.Serve(t)
	a.Sale(t, "p1", 100, 40, 0)
	_, tok := a.Shopper(t, "s@shop.test")
	streams := make([]*openapitest.Stream, 100)
	for i := range streams {
		streams[i] = open(t, base, "p1")
	}
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() { defer wg.Done(); buy(t, a, tok, "p1", 1) }()
	}
	wg.Wait()
	for i, s := range streams {
		if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Sale == "sold_out" }); !ok {
			t.Fatalf("stream %d never saw the sell-out", i)
		}
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric reads a gauge or counter of the app's registry: the series whose
// "reason" label is reason ("" for an unlabelled one).
func metric(t *testing.T, a *shoptest.App, name, reason string) float64 {
	t.Helper()
	mfs, err := a.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got = l.GetValue()
				}
			}
			if got == reason {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("%s{reason=%q} not found", name, reason)
	return 0
}
