package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

func TestSeedDemoIsIdempotent(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	env := map[string]string{
		"SHOP_DATABASE_URL": db.URL, "SHOP_REDIS_URL": r.URL, "SHOP_KEY_PREFIX": r.Prefix,
		"SHOP_LOG_LEVEL": "warn", "SHOP_ENV": "dev", "SHOP_PASSWORD_HASHING": "fast",
	}
	seed := func() (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{"seed", "demo"}, func(k string) string { return env[k] }, &out, &errb)
		return out.String(), err
	}
	count := func(q string) (n int) {
		t.Helper()
		if err := db.Pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 2 {
		out, err := seed()
		if err != nil || !strings.Contains(out, demoAdminEmail) {
			t.Fatalf("run %d: %v %q", i+1, err, out)
		}
		if p, rounds, admins := count(`SELECT count(*) FROM products`), count(`SELECT count(*) FROM sale_rounds`),
			count(`SELECT count(*) FROM users WHERE role = 'admin'`); p != len(demoCatalog) || rounds != 4 || admins != 1 {
			t.Fatalf("run %d: %d products, %d rounds, %d admins; want %d, 4, 1", i+1, p, rounds, admins, len(demoCatalog))
		}
	}
	// One demo shopper bought a phone, on the first run only; the rerun
	// says so, read from the store.
	if n := r.Client.HGet(context.Background(), r.Prefix+"sale:{phone-x1}", "available").Val(); n != "99" {
		t.Fatalf("phone-x1 available = %q, want 99", n)
	}
	if out, _ := seed(); !strings.Contains(out, "phone-x1: 99 of 100 units available, 1 per shopper") {
		t.Fatalf("rerun says %q, want phone-x1's units as the store has them", out)
	}
	if n := count(`SELECT count(DISTINCT description) FROM products WHERE description <> '' AND description <> '` +
		demoOldDescription + `'`); n != len(demoCatalog) {
		t.Fatalf("%d distinct descriptions, want one per product (%d)", n, len(demoCatalog))
	}
	if n := count(`SELECT count(DISTINCT sha256) FROM product_images`); n != len(demoCatalog) {
		t.Fatalf("%d distinct product images, want one per product (%d)", n, len(demoCatalog))
	}
	if n := count(`SELECT count(*) FROM stores`); n != len(demoStores) {
		t.Fatalf("%d stores, want %d", n, len(demoStores))
	}
	// tee-black 5 units, earbuds-pro 3, hoodie-grey 2, phone-x1 1.
	top := r.Client.ZRangeWithScores(context.Background(), r.Prefix+"{bestsellers}:all", 0, -1).Val()
	if len(top) != 4 || top[0].Member != "tee-black" || top[0].Score != -5 || top[3].Member != "phone-x1" {
		t.Fatalf("all-time best sellers %v", top)
	}
	env["SHOP_ENV"], env["SHOP_PASSWORD_HASHING"] = "", "owasp"
	if _, err := seed(); err == nil || !strings.Contains(err.Error(), "SHOP_ENV=dev") {
		t.Fatalf("outside dev: %v, want a refusal", err)
	}
}
