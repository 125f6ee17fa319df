package loadtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
)

// realSale writes, by hand and in the formats inventory and order use, a
// round of 5 units of which 3 were bought and written: the state a clean
// sale leaves behind. It returns the accepted order ids.
func realSale(t *testing.T, db *testenv.Database, r *testenv.Redis, sku string) (map[string]int64, []string) {
	t.Helper()
	ctx := context.Background()
	var round int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents)
		VALUES ($1, 5, 1, 100) RETURNING id`, sku).Scan(&round); err != nil {
		t.Fatal(err)
	}
	r.Client.HSet(ctx, Layout{Prefix: r.Prefix}.saleKey(sku), "round", round, "quantity", 5, "available", 2)
	if err := r.Client.XGroupCreateMkStream(ctx, r.Prefix+"orders", writersGroup, "$").Err(); err != nil {
		t.Fatal(err)
	}
	acc := map[string]int64{}
	var streamIDs []string
	for range 3 {
		id, user := uuid.NewString(), uuid.NewString()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, user, user+"@x.test"); err != nil {
			t.Fatal(err)
		}
		items := fmt.Sprintf(`[{"sku":%q,"quantity":1,"price_cents":100,"round_id":%d}]`, sku, round)
		sid := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: r.Prefix + "orders", Values: map[string]any{
			"order_id": id, "user_id": user, "created_ms": time.Now().UnixMilli(), "total_cents": 100, "items": items,
		}}).Val()
		r.Client.HIncrBy(ctx, Layout{Prefix: r.Prefix}.buyersKey(sku), user, 1)
		if _, err := db.Pool.Exec(ctx, `INSERT INTO orders (id, user_id, total_cents, stream_id, created_at) VALUES ($1, $2, 100, $3, now());
			`, id, user, sid); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO order_items (order_id, sku, round_id, quantity, price_cents) VALUES ($1, $2, $3, 1, 100)`,
			id, sku, round); err != nil {
			t.Fatal(err)
		}
		acc[id] = 1
		streamIDs = append(streamIDs, sid)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE sale_rounds SET sold = 3 WHERE id = $1`, round); err != nil {
		t.Fatal(err)
	}
	// The writer read them all and acknowledged them.
	r.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: writersGroup, Consumer: "w", Streams: []string{r.Prefix + "orders", ">"}})
	r.Client.XAck(ctx, r.Prefix+"orders", writersGroup, streamIDs...)
	return acc, streamIDs
}

// ReadStore reads the real stores, and Check catches a real state that was
// corrupted behind the shop's back.
func TestReadStoreCatchesCorruptedState(t *testing.T) {
	ctx := context.Background()
	// pend delivers a new entry to consumer w and leaves it pending.
	pend := func(r *testenv.Redis) string {
		r.Client.XAdd(ctx, &redis.XAddArgs{Stream: r.Prefix + "orders", ID: "99999999999999-0", Values: map[string]any{"x": 1}})
		r.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: writersGroup, Consumer: "w", Streams: []string{r.Prefix + "orders", ">"}})
		return "99999999999999-0"
	}
	// Each corruption returns what the first failure must name.
	tests := []struct {
		name    string
		corrupt func(t *testing.T, db *testenv.Database, r *testenv.Redis, sku string, acc map[string]int64) string
		fails   []string
	}{
		{"clean", func(*testing.T, *testenv.Database, *testenv.Redis, string, map[string]int64) string { return "" }, nil},
		{"row_lost", func(t *testing.T, db *testenv.Database, _ *testenv.Redis, _ string, acc map[string]int64) string {
			for id := range acc {
				if _, err := db.Pool.Exec(ctx, `DELETE FROM orders WHERE id = $1`, id); err != nil {
					t.Fatal(err)
				}
				return id
			}
			return ""
		}, []string{"I2", "I4", "I5"}},
		{"decrement_without_event", func(_ *testing.T, _ *testenv.Database, r *testenv.Redis, sku string, _ map[string]int64) string {
			r.Client.HIncrBy(ctx, Layout{Prefix: r.Prefix}.saleKey(sku), "available", -1)
			return "available 1"
		}, []string{"I4"}},
		{"stock_below_zero", func(_ *testing.T, _ *testenv.Database, r *testenv.Redis, sku string, _ map[string]int64) string {
			r.Client.HSet(ctx, Layout{Prefix: r.Prefix}.saleKey(sku), "available", -2)
			return "Redis available -2"
		}, []string{"I1", "I4"}},
		{"pending_unacked", func(_ *testing.T, _ *testenv.Database, r *testenv.Redis, _ string, _ map[string]int64) string {
			return pend(r)
		}, []string{"I5"}},
		{"pending_trimmed", func(_ *testing.T, _ *testenv.Database, r *testenv.Redis, _ string, _ map[string]int64) string {
			id := pend(r)
			r.Client.XDel(ctx, r.Prefix+"orders", id)
			return "gone from the stream (trimmed unwritten): " + id
		}, []string{"I5"}},
	}
	db := testenv.NewDatabase(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := testenv.NewRedis(t)
			sku := fmt.Sprintf("chk-%d", i)
			acc, _ := realSale(t, db, r, sku)
			answered := map[string]int64{}
			for id, n := range acc {
				answered[id] = n
			}
			want := tc.corrupt(t, db, r, sku, acc)
			st, err := ReadStore(ctx, r.Client, db.Pool, r.Prefix, sku)
			if err != nil {
				t.Fatal(err)
			}
			bad := Failed(Check(Evidence{Quantity: 5, PerUserLimit: 1, Answers: Answers{Accepted: answered}, Store: st}))
			var got []string
			for _, b := range bad {
				got = append(got, b.Name[:2])
			}
			if strings.Join(got, ",") != strings.Join(tc.fails, ",") {
				t.Fatalf("failed %+v, want %v", bad, tc.fails)
			}
			if len(bad) > 0 && !strings.Contains(bad[0].Detail, want) {
				t.Errorf("%s does not name %s", bad[0].Detail, want)
			}
		})
	}
}

// Run's stores read the layout the server recorded: with 16 order
// partitions recorded under the prefix, they read 16 (on a single Redis,
// untagged), and without a record the one partition of before.
func TestOpenStoresReadsRecordedPartitions(t *testing.T) {
	ctx := context.Background()
	db, r := testenv.NewDatabase(t), testenv.NewRedis(t)
	cfg := Config{RedisURL: r.URL, DatabaseURL: db.URL, KeyPrefix: r.Prefix}
	for _, n := range []int{0, 16} {
		if n > 0 {
			if err := r.Client.Set(ctx, r.Prefix+"orders:partitions", n, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		st, err := openStores(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		l := st.layout
		st.close()
		if want := max(n, 1); l.Prefix != r.Prefix || l.Partitions.Count() != want || l.Partitions.Grouped() {
			t.Errorf("recorded %d: the load test reads %d partitions under %q (grouped %v), want %d under %q",
				n, l.Partitions.Count(), l.Prefix, l.Partitions.Grouped(), want, r.Prefix)
		}
	}
}
