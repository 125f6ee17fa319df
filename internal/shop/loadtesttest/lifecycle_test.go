package loadtesttest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/loadtest"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// lifecycleShop is the whole shop in this process, with a payment window
// of ttl, its own expiry sweeper and an order writer, served on loopback,
// and an admin for the load test.
func lifecycleShop(t *testing.T, ttl time.Duration, more ...func(*config.Config)) (*shoptest.App, loadtest.Config) {
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
	return a, loadtest.Config{
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
	rep, err := loadtest.Run(context.Background(), cfg)
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
	rep, err := loadtest.Run(context.Background(), cfg)
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
// 0 alone never sees. (That Run's stores take their layout from LayoutOf
// is loadtest's own TestOpenStoresReadsRecordedPartitions.)
func TestRunOnPartitionedOrders(t *testing.T) {
	t.Parallel()
	a, cfg := lifecycleShop(t, 15*time.Minute, func(c *config.Config) { c.OrderPartitions = 16 })
	cfg.PayRatio = 0
	rep, err := loadtest.Run(context.Background(), cfg)
	if err != nil || !rep.OK {
		t.Fatalf("the sale: %v %s", err, rep.Failure())
	}
	ctx, sku, rdb, db := context.Background(), rep.SKU, a.Redis.Client, a.DB.Pool
	layout, err := loadtest.LayoutOf(ctx, rdb, cfg.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	parts := a.Config.Partitions()
	if layout.Partitions.Count() != 16 {
		t.Fatalf("the load test reads %d partitions, the server spreads over 16", layout.Partitions.Count())
	}
	var id, user, round string
	if err := db.QueryRow(ctx, `SELECT o.id::text, o.user_id::text, i.round_id::text FROM orders o
		JOIN order_items i ON i.order_id = o.id WHERE i.sku = $1 LIMIT 1`, sku).Scan(&id, &user, &round); err != nil {
		t.Fatal(err)
	}
	// The dead letter goes where the server's writer puts one: the SKU's
	// partition's dead letters, by the order package's own key names.
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: ledger.New(rdb, cfg.KeyPrefix, parts).Keys(parts.Of(sku)).Dead, Values: map[string]any{
		"event_order_id": id, "event_user_id": user,
		"event_items": `[{"sku":"` + sku + `","quantity":1,"price_cents":100,"round_id":` + round + `}]`,
	}})
	for _, l := range []loadtest.Layout{layout, {Prefix: cfg.KeyPrefix}} {
		store, err := loadtest.ReadStoreIn(ctx, rdb, db, l, sku)
		if err != nil {
			t.Fatal(err)
		}
		bad := loadtest.Failed(loadtest.Check(loadtest.Evidence{Quantity: int64(cfg.Units), PerUserLimit: cfg.PerUserLimit, Store: store}))
		caught := slices.ContainsFunc(bad, func(r loadtest.Invariant) bool {
			return strings.HasPrefix(r.Name, "I3") && strings.Contains(r.Detail, id)
		})
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
	rep, err := loadtest.Run(context.Background(), cfg)
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
	// The corruptions are written where the server keeps the state, by
	// inventory's and order's own key names.
	saleKey, releasedKey, dead := a.Stock.SaleKey(sku), a.Stock.ReleasedKey(sku), a.OrderKeys().Dead
	tests := []struct {
		name            string
		corrupt, repair func()
		fails, names    string
	}{
		{"clean", func() {}, func() {}, "", ""},
		{"unit_from_nowhere", func() { rdb.HIncrBy(ctx, saleKey, "available", 1) },
			func() { rdb.HIncrBy(ctx, saleKey, "available", -1) }, "I4", "available 6"},
		{"paid_order_released", func() { rdb.SAdd(ctx, releasedKey, paid) },
			func() { rdb.SRem(ctx, releasedKey, paid) }, "I7", paid + " (paid)"},
		{"transition_lost", func() {
			exec(`UPDATE order_transitions SET order_id = gen_random_uuid() WHERE order_id = $1`, expired)
		}, func() {}, "I7", expired + ": Redis expired, PostgreSQL confirmed"},
		{"persisted_and_dead_lettered", func() {
			rdb.XAdd(ctx, &redis.XAddArgs{Stream: dead, Values: map[string]any{
				"event_order_id": expired, "event_user_id": buyer,
				"event_items": `[{"sku":"` + sku + `","quantity":1,"price_cents":100,"round_id":` + round + `}]`,
			}})
		}, func() {}, "I3", "both persisted and dead-lettered: " + expired},
	}
	for _, tc := range tests {
		tc.corrupt()
		st, err := loadtest.ReadStore(ctx, rdb, db, prefix, sku)
		if err != nil {
			t.Fatal(err)
		}
		accepted := map[string]int64{}
		for _, r := range st.Rows {
			accepted[r.OrderID] = r.Units
		}
		ev := loadtest.Evidence{Quantity: int64(cfg.Units), PerUserLimit: cfg.PerUserLimit,
			Answers: loadtest.Answers{Accepted: accepted, Paid: []string{paid}}, Store: st}
		bad := loadtest.Failed(loadtest.Check(ev))
		switch {
		case tc.fails == "" && len(bad) > 0:
			t.Fatalf("%s: %+v", tc.name, bad)
		case tc.fails != "" && (len(bad) == 0 || !strings.HasPrefix(bad[0].Name, tc.fails) || !strings.Contains(bad[0].Detail, tc.names)):
			t.Errorf("%s: failed %+v, want %s naming %q", tc.name, bad, tc.fails, tc.names)
		}
		tc.repair()
	}
}
