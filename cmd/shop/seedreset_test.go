package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/testenv"
)

// seed demo --reset: a demo an admin edited and shoppers bought from is
// seeded afresh, while a product, its round, its buyer and their order
// that are not the demo's are left exactly as they were.
func TestSeedDemoResetClearsOnlyTheDemo(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	env := map[string]string{
		"SHOP_DATABASE_URL": db.URL, "SHOP_REDIS_URL": r.URL, "SHOP_KEY_PREFIX": r.Prefix,
		"SHOP_LOG_LEVEL": "warn", "SHOP_ENV": "dev", "SHOP_PASSWORD_HASHING": "fast",
	}
	seed := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, append([]string{"seed", "demo"}, args...), func(k string) string { return env[k] }, &out, &errb); err != nil {
			t.Fatalf("seed demo %v: %v %s", args, err, errb.String())
		}
		return out.String()
	}
	one := func(q string, args ...any) (s string) {
		t.Helper()
		if err := db.Pool.QueryRow(ctx, q, args...).Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return s
	}
	seed()
	admin := one(`SELECT id::text FROM users WHERE email = $1`, demoAdminEmail)
	mine := nonDemoOrder(t, db, r, "lamp", 3)
	// The demo as a walk-through leaves it: a product renamed, a shopper's
	// order of a demo unit, the flash sale's units gone.
	buyer := ordertesting.User(t, db.Pool)
	phoneRound := one(`SELECT id::text FROM sale_rounds WHERE sku = 'phone-x1'`)
	insertOrder(t, db, buyer, "phone-x1", phoneRound)
	db.Pool.Exec(ctx, `UPDATE products SET name = 'Renamed' WHERE sku = 'tee-black'`)
	r.Client.HSet(ctx, r.Prefix+"sale:{phone-x1}", "available", 0)
	before := r.Client.HGetAll(ctx, r.Prefix+"sale:{lamp}").Val()

	if out := seed("--reset"); !strings.Contains(out, "phone-x1: 99 of 100 units available") {
		t.Fatalf("reset says %q, want the flash sale fresh", out)
	}
	for q, want := range map[string]string{
		`SELECT name FROM products WHERE sku = 'tee-black'`:                                    "T-shirt, black",
		`SELECT count(*)::text FROM sale_rounds WHERE sku <> 'lamp'`:                           "4",
		`SELECT count(*)::text FROM sale_rounds WHERE sku = 'phone-x1' AND id > ` + phoneRound: "1",
		`SELECT count(*)::text FROM users WHERE email LIKE 'shopper%@demo.shop'`:               "3",
		`SELECT id::text FROM users WHERE email = '` + demoAdminEmail + `'`:                    admin,
		`SELECT count(*)::text FROM orders WHERE user_id = '` + buyer + `'`:                    "0",
		`SELECT count(*)::text FROM users WHERE id = '` + buyer + `'`:                          "1",
		`SELECT count(*)::text FROM orders WHERE id = '` + mine.order + `'`:                    "1",
		`SELECT count(*)::text FROM users WHERE id = '` + mine.user + `'`:                      "1",
		`SELECT count(*)::text FROM products WHERE sku = 'lamp'`:                               "1",
		`SELECT count(*)::text FROM sale_rounds WHERE id = ` + mine.round:                      "1",
	} {
		if got := one(q); got != want {
			t.Errorf("%s = %q, want %q", q, got, want)
		}
	}
	if after := r.Client.HGetAll(ctx, r.Prefix+"sale:{lamp}").Val(); after["available"] != before["available"] || after["round"] != before["round"] {
		t.Errorf("lamp's live stock %v, was %v", after, before)
	}
	// The old demo orders' statuses are gone (no sweeper finds them): the
	// new sales' seven lines are the only orders Redis knows.
	var statuses []string
	iter := r.Client.Scan(ctx, 0, r.Prefix+"order:*", 100).Iterator()
	for iter.Next(ctx) {
		statuses = append(statuses, iter.Val())
	}
	if len(statuses) != 7 {
		t.Errorf("%d order statuses in Redis, want the 7 of the new demo sales: %v", len(statuses), statuses)
	}
	// The demo shoppers' units once (not the old sales too), and the
	// non-demo order's, which the boards' rebuild counts from PostgreSQL.
	want := map[string]float64{"tee-black": -5, "earbuds-pro": -3, "hoodie-grey": -2, "phone-x1": -1, "lamp": -1}
	top := r.Client.ZRangeWithScores(ctx, r.Prefix+"{bestsellers}:all", 0, -1).Val()
	for _, z := range top {
		if want[z.Member.(string)] != z.Score {
			t.Errorf("all-time best sellers %v, want %v", top, want)
			break
		}
	}
	if len(top) != len(want) {
		t.Errorf("all-time best sellers %v, want %v", top, want)
	}
}

// nonDemo is an order an admin's own shop holds beside the demo.
type nonDemo struct{ user, order, round string }

// nonDemoOrder opens a sale of sku (not the demo's) and records a
// persisted order of one unit of it by a user of its own.
func nonDemoOrder(t *testing.T, db *testenv.Database, r *testenv.Redis, sku string, quantity int) nonDemo {
	t.Helper()
	stock := inventory.NewStock(r.Client, r.Prefix)
	round := ordertesting.OpenSale(t, db.Pool, stock, r, sku, quantity, 1, 500)
	user := ordertesting.User(t, db.Pool)
	id := insertOrder(t, db, user, sku, strconv.FormatInt(round, 10))
	return nonDemo{user: user, order: id, round: strconv.FormatInt(round, 10)}
}

// insertOrder records a persisted order of one unit of sku in round, as
// the writer would.
func insertOrder(t *testing.T, db *testenv.Database, user, sku, round string) string {
	t.Helper()
	id := uuid.NewString()
	_, err := db.Pool.Exec(context.Background(), `
WITH o AS (INSERT INTO orders (id, user_id, total_cents, stream_id, created_at) VALUES ($1, $2, 100, '0-1', now()) RETURNING id)
INSERT INTO order_items (order_id, sku, round_id, quantity, price_cents) SELECT id, $3, $4::bigint, 1, 100 FROM o`, id, user, sku, round)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
