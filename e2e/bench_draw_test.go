package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// redisMemory is the bytes (MEMORY USAGE) and the count of the shop's
// keys (its prefix's: the test Redis is shared with other tests), its
// streams left out of the bytes: the writer trims the orders of step 1
// meanwhile.
func redisMemory(t *testing.T, s *shop) (used, keys int64) {
	t.Helper()
	ctx := context.Background()
	iter := s.watch.rdb.Scan(ctx, 0, s.watch.env["SHOP_KEY_PREFIX"]+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if keys++; s.watch.rdb.Type(ctx, iter.Val()).Val() != "stream" {
			used += s.watch.rdb.MemoryUsage(ctx, iter.Val()).Val()
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return used, keys
}

// bigDraw draws a round of entries entries (inserted in SQL) for units
// units and reports its times and storage.
func bigDraw(t *testing.T, s *shop, e env, entries, units int) string {
	t.Helper()
	ctx, db := context.Background(), openPool(t, e)
	const sku = "big-draw"
	s.product(t, sku, 100, map[string]any{"quantity": units,
		"draw": map[string]any{"closes_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	var round int64
	if err := db.QueryRow(ctx, `SELECT id FROM sale_rounds WHERE sku = $1`, sku).Scan(&round); err != nil {
		t.Fatal(err)
	}
	var rows0 int64
	var size0 int64
	if err := db.QueryRow(ctx, `SELECT count(*), pg_total_relation_size('draw_entries') FROM draw_entries`).Scan(&rows0, &size0); err != nil {
		t.Fatal(err)
	}
	// Shoppers of their own (a won order names its buyer) and one entry
	// each, authorised with the test provider, as entering leaves them.
	_, err := db.Exec(ctx, `
WITH u AS (
  INSERT INTO users (id, email, password_hash)
  SELECT gen_random_uuid(), 'draw-' || n || '@bench.test', 'x' FROM generate_series(1, $2::int) n RETURNING id)
INSERT INTO draw_entries (id, round_id, user_id, quantity, state, amount_cents, provider, payment_id, payment_status, fingerprint)
SELECT gen_random_uuid(), $1, u.id, 1, 'entered', 100, 'test', 'hold_bench_' || u.id, 'requires_capture', $3 FROM u`,
		round, entries, sku+" 1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `VACUUM ANALYZE draw_entries`); err != nil {
		t.Fatal(err)
	}
	var size1 int64
	if err := db.QueryRow(ctx, `SELECT pg_total_relation_size('draw_entries')`).Scan(&size1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := db.Exec(ctx, `UPDATE sale_rounds SET draw_closes_at = now() WHERE id = $1`, round); err != nil {
		t.Fatal(err)
	}
	waitDraw := func(cond string) time.Time {
		return waitFor(t, round, cond, func(q string, args ...any) (ok bool) {
			if err := db.QueryRow(ctx, q, args...).Scan(&ok); err != nil {
				t.Fatal(err)
			}
			return ok
		})
	}
	captured := waitDraw(fmt.Sprintf(`count(*) FILTER (WHERE state = 'won') = %d`, units))
	drawn := waitDraw(`bool_and(cancelled_at IS NOT NULL OR state = 'won')`)
	var size2 int64
	if err := db.QueryRow(ctx, `SELECT pg_total_relation_size('draw_entries')`).Scan(&size2); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "draw of %d entries (inserted in SQL), %d units, test provider, no cancel rate:\n", entries, units)
	fmt.Fprintf(&b, "  close to every winner captured: %s (the runner looks every 1 s)\n", captured.Sub(start).Round(10*time.Millisecond))
	fmt.Fprintf(&b, "  then every loser cancelled:     %s (%d cancels, %.0f/s)\n", drawn.Sub(captured).Round(10*time.Millisecond),
		entries-units, float64(entries-units)/drawn.Sub(captured).Seconds())
	fmt.Fprintf(&b, "  draw_entries with its indexes: %.0f bytes per entry as entered (%d MiB), %.0f after the draw (%d MiB, not vacuumed; the %d entries of step 1 included)\n",
		float64(size1-size0)/float64(entries), size1>>20, float64(size2)/float64(int64(entries)+rows0), size2>>20, rows0)
	return b.String()
}

// waitFor polls round's entries every 100 ms until cond (an aggregate
// over them) holds, by ask, and returns when it did.
func waitFor(t *testing.T, round int64, cond string, ask func(q string, args ...any) bool) time.Time {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ask(`SELECT coalesce(`+cond+`, false) FROM draw_entries WHERE round_id = $1`, round) {
			return time.Now()
		}
	}
	t.Fatalf("the draw never reached %s", cond)
	return time.Time{}
}

// TestBenchDraw is `make bench-draw`: docs/design/draws.md's "Costs to
// measure" on one `shop serve` with the test provider (the steps are in
// scripts/bench-draw.sh and BENCHMARKS.md "Draws").
func TestBenchDraw(t *testing.T) {
	cfg := benchLoad(t, "SHOP_BENCH_DRAW", "make bench-draw", 10*time.Second, 32, 8)
	draws, entries, units := benchInt(t, "BENCH_DRAWS", 100), benchInt(t, "BENCH_DRAW_ENTRIES", 100_000),
		benchInt(t, "BENCH_DRAW_UNITS", 1000)
	e := newEnv(t)
	e["SHOP_DRAW_CANCEL_RATE"] = "0" // the cancels' own cost; the default, 20/s, would take 82 min
	s := newShop(t, e)
	var out bytes.Buffer
	fmt.Fprintf(&out, "\n== draws: %d connections, %s per load, %d shoppers\n", cfg.conns, cfg.duration, cfg.users)

	var skus, drawSKUs []string
	for i := range cfg.skus {
		skus = append(skus, "buy-"+strconv.Itoa(i))
		s.product(t, skus[i], 100, map[string]any{"quantity": 10_000_000, "per_user_limit": 0})
	}
	closes := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i := range draws {
		drawSKUs = append(drawSKUs, "enter-"+strconv.Itoa(i))
		s.product(t, drawSKUs[i], 100, map[string]any{"quantity": 10, "draw": map[string]any{"closes_at": closes}})
	}
	tokens := s.shoppers(t, cfg.users, "bench")
	bought := purchaseLoad(t, s, cfg, skus, tokens)
	for _, sku := range skus { // the writer drained: Redis holds still while the entries run
		s.waitConfirmed(t, sku, s.stock(t, sku).Sold)
	}
	mem0, keys0 := redisMemory(t, s)
	body := []byte(`{"quantity":1,"payment_token":"tok_visa"}`)
	entered := postLoad(s, cfg, http.StatusCreated, func(w, i int) (string, string, []byte, bool) {
		k := w + i*cfg.conns // each (shopper, draw) pair once
		if k >= len(tokens)*len(drawSKUs) {
			return "", "", nil, false
		}
		return "/products/" + drawSKUs[k/len(tokens)] + "/draw/entries", tokens[k%len(tokens)], body, true
	})
	mem1, keys1 := redisMemory(t, s)
	fmt.Fprintf(&out, "%-10s %10s %9s %9s %9s\n", "load", "per s", "p50 ms", "p99 ms", "other")
	for _, r := range []struct {
		name string
		r    benchResult
	}{{"purchases", bought}, {"entries", entered}} {
		fmt.Fprintf(&out, "%-10s %10.0f %9.2f %9.2f %9d\n", r.name, r.r.perSec, ms(r.r.p50), ms(r.r.p99), r.r.other)
	}
	fmt.Fprintf(&out, "entries/purchases: %.2f\n", entered.perSec/bought.perSec)
	fmt.Fprintf(&out, "Redis over the %d entries: the shop's keys but its streams %+d bytes (%.1f per entry), %+d keys\n",
		entered.accepted, mem1-mem0, float64(mem1-mem0)/float64(max(entered.accepted, 1)), keys1-keys0)

	fmt.Fprintf(&out, "load average: %s\n", loadavg())
	fmt.Print(out.String()) // with -v: scripts/bench-draw.sh; before the long draw
	fmt.Print(bigDraw(t, s, e, entries, units))
	fmt.Printf("load average at the end: %s\n", loadavg())
}
