package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// lifecycleShop is the whole shop in this process, with a payment window
// of ttl, its own expiry sweeper and an order writer, served on loopback,
// and an admin for the load test.
func lifecycleShop(t *testing.T, ttl time.Duration, more ...func(*config.Config)) (*shoptest.App, Config) {
	t.Helper()
	a := shoptest.New(t, shoptest.Options{Config: func(c *config.Config) {
		c.PaymentTTL = ttl
		for _, f := range more {
			f(c)
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Writer(writer.Options{Consumer: "lt"}).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	})
	a.User(t, "lt-admin@example.com", "admin")
	return a, Config{
		Target: a.Serve(t), AdminEmail: "lt-admin@example.com", AdminPassword: shoptest.Password,
		Users: 12, Units: 10, PerUserLimit: 1, Connections: 6, Duration: 10 * time.Second,
		Timeout: 5 * time.Second, DrainTimeout: 30 * time.Second, Sample: 4, SetupWorkers: 4,
		PayRatio: 0.5, ExpiryTimeout: 30 * time.Second,
		RedisURL: a.Redis.URL, DatabaseURL: a.DB.URL, KeyPrefix: a.Config.KeyPrefix,
	}
}

// A sale where half the winners pay: 5 paid, the other 5 expire on the
// server's sweep and give their units back once each; every invariant,
// on the stores and over the API, holds. On a machine so loaded that a
// payment comes after its order's 4 s window, that payer is counted too
// late and its order expires with the others: the invariants hold all the
// same.
func TestRunWithPayRatio(t *testing.T) {
	t.Parallel()
	_, cfg := lifecycleShop(t, 4*time.Second)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("invariants failed: %s", rep.Failure())
	}
	lc := rep.Lifecycle
	if lc == nil || lc.Payers != 5 || lc.Paid == 0 || lc.Paid+lc.Late != 5 || lc.Expiring != 10-lc.Paid ||
		lc.Expired != lc.Expiring || lc.ReleasedUnits != int64(lc.Expiring) || !lc.Released || lc.NoWindow != 0 {
		t.Fatalf("lifecycle %+v", lc)
	}
	paid := int64(lc.Paid)
	if s := rep.Stock; s.Available != 10-paid || s.Paid != paid || s.Released != 10-paid || s.Sold != paid || s.Confirmed != 10 {
		t.Errorf("stock %+v", s)
	}
	var names []string
	for _, inv := range rep.Invariants {
		if inv.Skipped {
			t.Errorf("%s skipped: %s", inv.Name, inv.Detail)
		}
		names = append(names, inv.Name)
	}
	if len(rep.Invariants) != 14 || !strings.HasPrefix(names[6], "I7") || !strings.Contains(names[13], "released once") {
		t.Errorf("invariants %q", names)
	}
	var text strings.Builder
	want := fmt.Sprintf("%d of %d unpaid orders expired, %d units released", lc.Expiring, lc.Expiring, lc.Expiring)
	if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), want) {
		t.Errorf("text report: %v\n%s", err, text.String())
	}
}

// Without a pay ratio nobody pays and nothing is waited for: the orders
// stay confirmed within the server's (default) payment window, as before.
func TestRunWithoutPayRatio(t *testing.T) {
	t.Parallel()
	_, cfg := lifecycleShop(t, 15*time.Minute)
	cfg.PayRatio = 0
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Lifecycle != nil || rep.Stock.Paid != 0 || !rep.Invariants[13].Skipped {
		t.Fatalf("ok %v, lifecycle %+v, stock %+v, %+v", rep.OK, rep.Lifecycle, rep.Stock, rep.Invariants[13])
	}
}

// Against a server whose orders are spread over 16 partitions, the checks
// read the partitions the server recorded: the sale passes, and an order
// both persisted and dead-lettered in its SKU's partition (not the
// untagged stream of partition 0) breaks I3, which a reading of partition
// 0 alone never sees.
func TestRunOnPartitionedOrders(t *testing.T) {
	t.Parallel()
	a, cfg := lifecycleShop(t, 15*time.Minute, func(c *config.Config) { c.OrderPartitions = 16 })
	cfg.PayRatio = 0
	rep, err := Run(context.Background(), cfg)
	if err != nil || !rep.OK {
		t.Fatalf("the sale: %v %s", err, rep.Failure())
	}
	ctx, sku := context.Background(), rep.SKU
	st, err := openStores(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	parts := a.Config.Partitions()
	if st.layout.Partitions.Count() != 16 {
		t.Fatalf("the load test reads %d partitions, the server spreads over 16", st.layout.Partitions.Count())
	}
	var id, user, round string
	if err := a.DB.Pool.QueryRow(ctx, `SELECT o.id::text, o.user_id::text, i.round_id::text FROM orders o
		JOIN order_items i ON i.order_id = o.id WHERE i.sku = $1 LIMIT 1`, sku).Scan(&id, &user, &round); err != nil {
		t.Fatal(err)
	}
	st.rdb.XAdd(ctx, &redis.XAddArgs{Stream: st.layout.stream(parts.Of(sku)) + ":dead", Values: map[string]any{
		"event_order_id": id, "event_user_id": user,
		"event_items": `[{"sku":"` + sku + `","quantity":1,"price_cents":100,"round_id":` + round + `}]`,
	}})
	for _, l := range []Layout{st.layout, {Prefix: cfg.KeyPrefix}} {
		store, err := ReadStoreIn(ctx, st.rdb, st.db, l, sku)
		if err != nil {
			t.Fatal(err)
		}
		bad := Failed(Check(Evidence{Quantity: int64(cfg.Units), PerUserLimit: cfg.PerUserLimit, Store: store}))
		caught := slices.ContainsFunc(bad, func(r Invariant) bool { return strings.HasPrefix(r.Name, "I3") && strings.Contains(r.Detail, id) })
		if partitioned := l.Partitions.Count() == 16; caught != partitioned && !(parts.Of(sku) == 0 && caught) {
			t.Errorf("reading %d partitions (the SKU is in partition %d): I3 caught %v, failures %+v",
				l.Partitions.Count(), parts.Of(sku), caught, bad)
		}
	}
}

// ReadStore reads what the lifecycle left in the real stores, and Check
// catches each corruption of it: a unit from nowhere, a paid order in the
// released set, a transition PostgreSQL lost, an order both written and
// dead-lettered. Each is undone before the next.
func TestReadStoreCatchesLifecycleCorruption(t *testing.T) {
	t.Parallel()
	a, cfg := lifecycleShop(t, 4*time.Second)
	rep, err := Run(context.Background(), cfg)
	if err != nil || !rep.OK {
		t.Fatalf("the sale: %v %s", err, rep.Failure())
	}
	ctx, db, rdb, prefix, sku := context.Background(), a.DB.Pool, a.Redis.Client, cfg.KeyPrefix, rep.SKU
	byStatus := func(status string) (id, user string) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT t.order_id::text, o.user_id::text FROM order_transitions t JOIN orders o ON o.id = t.order_id
			WHERE t.status = $1 ORDER BY 1 LIMIT 1`, status).Scan(&id, &user); err != nil {
			t.Fatal(err)
		}
		return id, user
	}
	var round string
	if err := db.QueryRow(ctx, `SELECT id::text FROM sale_rounds WHERE sku = $1`, sku).Scan(&round); err != nil {
		t.Fatal(err)
	}
	paid, _ := byStatus("paid")
	expired, buyer := byStatus("expired")
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name            string
		corrupt, repair func()
		fails, names    string
	}{
		{"clean", func() {}, func() {}, "", ""},
		{"unit_from_nowhere", func() { rdb.HIncrBy(ctx, Layout{Prefix: prefix}.saleKey(sku), "available", 1) },
			func() { rdb.HIncrBy(ctx, Layout{Prefix: prefix}.saleKey(sku), "available", -1) }, "I4", "available 6"},
		{"paid_order_released", func() { rdb.SAdd(ctx, Layout{Prefix: prefix}.releasedKey(sku), paid) },
			func() { rdb.SRem(ctx, Layout{Prefix: prefix}.releasedKey(sku), paid) }, "I7", paid + " (paid)"},
		{"transition_lost", func() {
			exec(`UPDATE order_transitions SET order_id = gen_random_uuid() WHERE order_id = $1`, expired)
		}, func() {}, "I7", expired + ": Redis expired, PostgreSQL confirmed"},
		{"persisted_and_dead_lettered", func() {
			rdb.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "orders:dead", Values: map[string]any{
				"event_order_id": expired, "event_user_id": buyer,
				"event_items": `[{"sku":"` + sku + `","quantity":1,"price_cents":100,"round_id":` + round + `}]`,
			}})
		}, func() {}, "I3", "both persisted and dead-lettered: " + expired},
	}
	for _, tc := range tests {
		tc.corrupt()
		st, err := ReadStore(ctx, rdb, db, prefix, sku)
		if err != nil {
			t.Fatal(err)
		}
		accepted := map[string]int64{}
		for _, r := range st.Rows {
			accepted[r.OrderID] = r.Units
		}
		ev := Evidence{Quantity: int64(cfg.Units), PerUserLimit: cfg.PerUserLimit, Answers: Answers{Accepted: accepted, Paid: []string{paid}}, Store: st}
		bad := Failed(Check(ev))
		switch {
		case tc.fails == "" && len(bad) > 0:
			t.Fatalf("%s: %+v", tc.name, bad)
		case tc.fails != "" && (len(bad) == 0 || !strings.HasPrefix(bad[0].Name, tc.fails) || !strings.Contains(bad[0].Detail, tc.names)):
			t.Errorf("%s: failed %+v, want %s naming %q", tc.name, bad, tc.fails, tc.names)
		}
		tc.repair()
	}
}

// A payment answered 409 order_pending (not persisted yet) is tried again
// after its Retry-After, and given up after payAttempts tries; a 409
// order_not_payable is an answer, not retried.
func TestPayOneRetriesPendingOrders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.URL.Path]++
		n := calls[r.URL.Path]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/late/"):
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"status":409,"code":"order_not_payable"}`)
		case strings.Contains(r.URL.Path, "/never/") || n <= 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"status":409,"code":"order_pending"}`)
		default:
			fmt.Fprint(w, `{"status":"paid"}`)
		}
	}))
	t.Cleanup(srv.Close)
	tgt, err := resolveTarget(context.Background(), srv.URL, false)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(tgt, time.Second)
	for _, tc := range []struct {
		id, outcome string
		retries     int
	}{
		{"soon", "200 paid", 2},
		{"late", "409 order_not_payable", 0},
		{"never", "409 order_pending", payAttempts - 1},
	} {
		outcome, retries, err := payOne(context.Background(), c, tc.id, "token")
		if err != nil || outcome != tc.outcome || retries != tc.retries {
			t.Errorf("%s: %q after %d retries (%v), want %q after %d", tc.id, outcome, retries, err, tc.outcome, tc.retries)
		}
	}
}

// A sampled order read back pending is read again until the deadline: the
// drain's confirmed count is the writer's PostgreSQL commit, and the
// status is marked confirmed just after it. One pending for good is
// reported once the deadline passes.
func TestSampledOrderPendingIsReadAgain(t *testing.T) {
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		status := "confirmed"
		if strings.HasSuffix(r.URL.Path, "/never") || strings.HasSuffix(r.URL.Path, "/soon") && reads.Add(1) <= 2 {
			status = "pending"
		}
		fmt.Fprintf(w, `{"status":%q,"items":[{"sku":"s","quantity":1}]}`, status)
	}))
	t.Cleanup(srv.Close)
	tgt, err := resolveTarget(context.Background(), srv.URL, false)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(tgt, time.Second)
	fx := &fixture{sku: "s", shoppers: []shopper{{token: "t"}}}
	bad, err := checkSample(context.Background(), c, fx, []sampled{{orderID: "soon"}}, time.Now().Add(time.Minute))
	if err != nil || len(bad) != 0 || reads.Load() != 3 {
		t.Fatalf("soon: bad %v (%v) after %d reads, want none after 3", bad, err, reads.Load())
	}
	bad, err = checkSample(context.Background(), c, fx, []sampled{{orderID: "never"}}, time.Now().Add(3*drainPoll))
	if err != nil || len(bad) != 1 || !strings.Contains(bad[0], "status pending") {
		t.Fatalf("never: bad %v (%v), want it reported pending", bad, err)
	}
}
