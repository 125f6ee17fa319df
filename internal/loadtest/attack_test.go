package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// fakeSale is a stand-in for the shop's purchase route, enough to check
// what the attack sends and how it reads the answers: it is not a model of
// the shop (the e2e test runs the real one).
type fakeSale struct {
	mu        sync.Mutex
	available int
	limit     int
	bought    map[string]int // bearer token -> units
	keys      map[string]bool
	forwarded map[string]string // bearer token -> X-Forwarded-For
	bad       []string
}

func (f *fakeSale) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	key := r.Header.Get("Idempotency-Key")
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/api/v1/products/lt-run/purchase":
		f.bad = append(f.bad, r.Method+" "+r.URL.Path)
	case key == "" || f.keys[key]:
		f.bad = append(f.bad, "idempotency key reused or missing: "+key)
	case r.Header.Get("Content-Type") != "application/json":
		f.bad = append(f.bad, "content type "+r.Header.Get("Content-Type"))
	}
	f.keys[key] = true
	f.forwarded[token] = r.Header.Get("X-Forwarded-For")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case f.limit > 0 && f.bought[token] >= f.limit:
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"status":409,"code":"limit_exceeded"}`)
	case f.available == 0:
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"status":409,"code":"out_of_stock"}`)
	default:
		f.available--
		f.bought[token]++
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"order_id":%q,"status":"pending"}`, uuid.NewString())
	}
}

func startFake(t *testing.T, available, limit int) (*fakeSale, target) {
	t.Helper()
	f := &fakeSale{available: available, limit: limit, bought: map[string]int{}, keys: map[string]bool{}, forwarded: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	tgt, err := resolveTarget(context.Background(), srv.URL, false)
	if err != nil {
		t.Fatal(err)
	}
	return f, tgt
}

func fakeFixture(n int) *fixture {
	fx := &fixture{run: "run", sku: "lt-run"}
	for i := range n {
		fx.shoppers = append(fx.shoppers, shopper{token: fmt.Sprintf("token-%d", i), addr: shopperAddr(i).String()})
	}
	return fx
}

func attackConfig(units, limit int) Config {
	return Config{Units: units, PerUserLimit: limit, Connections: 8, Duration: 20 * time.Second,
		Timeout: 5 * time.Second, Sample: 5, Warn: &strings.Builder{}}
}

// TestAttackSoldOut: the attack ends by itself once stock is gone, long
// before its duration, and every accepted purchase is counted for the
// shopper who made it.
func TestAttackSoldOut(t *testing.T) {
	f, tgt := startFake(t, 300, 0)
	fx := fakeFixture(7)
	cfg := attackConfig(300, 0)
	cfg.ForwardedFor = true
	res, err := attack(context.Background(), tgt, cfg, fx)
	if err != nil {
		t.Fatal(err)
	}
	if res.stoppedBy != stopSoldOut || res.elapsed > 10*time.Second {
		t.Errorf("stopped by %s after %s, want sold_out early", res.stoppedBy, res.elapsed)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		t.Errorf("bad requests: %q", f.bad[:min(3, len(f.bad))])
	}
	tl := res.tally
	if tl.accepted != 300 || len(tl.orders) != 300 || tl.unattributed != 0 || len(tl.sample) != 5 {
		t.Errorf("accepted %d, distinct %d, unattributed %d, sample %d", tl.accepted, len(tl.orders), tl.unattributed, len(tl.sample))
	}
	for i, s := range fx.shoppers {
		if tl.perShopper[i] != f.bought[s.token] {
			t.Errorf("shopper %d: tallied %d, server sold %d", i, tl.perShopper[i], f.bought[s.token])
		}
		if f.forwarded[s.token] != s.addr {
			t.Errorf("shopper %d sent X-Forwarded-For %q, want %s", i, f.forwarded[s.token], s.addr)
		}
	}
	if int(res.metrics.Requests) != tl.requests || res.metrics.Latencies.P99 <= 0 {
		t.Errorf("metrics: %d requests, p99 %s", res.metrics.Requests, res.metrics.Latencies.P99)
	}
}

// TestAttackAllAtLimit: with more stock than shoppers may buy, the attack
// ends once every shopper has bought the limit.
func TestAttackAllAtLimit(t *testing.T) {
	_, tgt := startFake(t, 1000, 3)
	res, err := attack(context.Background(), tgt, attackConfig(1000, 3), fakeFixture(5))
	if err != nil {
		t.Fatal(err)
	}
	if res.stoppedBy != stopLimits || res.tally.accepted != 15 {
		t.Errorf("stopped by %s with %d accepted, want all_at_limit with 15", res.stoppedBy, res.tally.accepted)
	}
	if _, most := res.tally.maxPerShopper(); most != 3 {
		t.Errorf("most by one shopper %d, want 3", most)
	}
}

// TestAttackRateAndDuration: at a fixed rate the attack runs for its
// duration and sends about rate × duration requests.
func TestAttackRateAndDuration(t *testing.T) {
	_, tgt := startFake(t, 1_000_000, 0)
	cfg := attackConfig(1_000_000, 0)
	cfg.Rate, cfg.Duration = 200, time.Second
	res, err := attack(context.Background(), tgt, cfg, fakeFixture(3))
	if err != nil {
		t.Fatal(err)
	}
	if res.stoppedBy != stopDuration || res.tally.requests < 190 || res.tally.requests > 210 {
		t.Errorf("stopped by %s after %d requests, want duration after ~200", res.stoppedBy, res.tally.requests)
	}
}

func TestAttackInterrupted(t *testing.T) {
	_, tgt := startFake(t, 1_000_000, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := attack(ctx, tgt, attackConfig(1_000_000, 0), fakeFixture(3))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the interruption", err)
	}
}

// TestAttackWarnsWhenRateLimited: 429s are counted and explained, since a
// load test from one address would otherwise measure only the limiter.
func TestAttackWarnsWhenRateLimited(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"status":429,"code":"rate_limited"}`)
	}))
	t.Cleanup(srv.Close)
	tgt, err := resolveTarget(context.Background(), srv.URL, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := attackConfig(10, 0)
	cfg.Rate, cfg.Duration = 50, time.Second
	warn := &strings.Builder{}
	cfg.Warn = warn
	res, err := attack(context.Background(), tgt, cfg, fakeFixture(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.tally.limited == 0 || res.tally.outcomes["429 rate_limited"] != res.tally.limited {
		t.Errorf("limited %d, outcomes %v", res.tally.limited, res.tally.outcomes)
	}
	if !strings.Contains(warn.String(), "were rate-limited (429)") || !strings.Contains(warn.String(), "SHOP_RATE_LIMIT=0") {
		t.Errorf("warning = %q", warn.String())
	}
}
