package loadtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// clusterSale writes, by hand and in the formats a server on a cluster
// uses (every key of the SKU tagged by its partition, the event in the
// partition's stream, each order's status hash tagged by the home the id
// is stamped with), a round of 5 units of which 3 were bought, written and
// acknowledged. With twin, the third order is a checkout whose home is
// another partition, its event in that partition's stream under the same
// entry id as the first order's (two streams hand out the same id in the
// same millisecond). It returns the accepted order ids and their users.
func clusterSale(t *testing.T, db *testenv.Database, rdb redis.UniversalClient, l Layout, sku string, twin bool) (acc map[string]int64, users map[string]string) {
	t.Helper()
	ctx := context.Background()
	var round int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents, sold)
		VALUES ($1, 5, 1, 100, 3) RETURNING id`, sku).Scan(&round); err != nil {
		t.Fatal(err)
	}
	k := l.Partitions.Of(sku)
	stream := l.stream(k)
	must(t, rdb.HSet(ctx, l.saleKey(sku), "round", round, "quantity", 5, "available", 2).Err())
	if err := rdb.XGroupCreateMkStream(ctx, stream, writersGroup, "0").Err(); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		t.Fatal(err)
	}
	acc, users = map[string]int64{}, map[string]string{}
	acked := map[string][]string{} // stream -> entry ids
	for i := range 3 {
		home, in, sid := k, stream, "*"
		if twin && i == 2 {
			home = (k + 1) % l.Partitions.Count()
			in, sid = l.stream(home), acked[stream][0]
			if err := rdb.XGroupCreateMkStream(ctx, in, writersGroup, "0").Err(); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
				t.Fatal(err)
			}
		}
		id, user := l.Partitions.Stamp(uuid.Must(uuid.NewV7()), home).String(), uuid.NewString()
		items := fmt.Sprintf(`[{"sku":%q,"quantity":1,"price_cents":100,"round_id":%d}]`, sku, round)
		sid, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: in, ID: sid, Values: map[string]any{
			"order_id": id, "user_id": user, "created_ms": time.Now().UnixMilli(), "total_cents": 100, "items": items,
		}}).Result()
		must(t, err)
		acked[in] = append(acked[in], sid)
		must(t, rdb.HIncrBy(ctx, l.buyersKey(sku), user, 1).Err())
		must(t, rdb.HSet(ctx, l.statusKey(id), "status", "confirmed").Err())
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, []any{user, user + "@x.test"}},
			{`INSERT INTO orders (id, user_id, total_cents, stream_id, created_at) VALUES ($1, $2, 100, $3, now())`, []any{id, user, sid}},
			{`INSERT INTO order_items (order_id, sku, round_id, quantity, price_cents) VALUES ($1, $2, $3, 1, 100)`, []any{id, sku, round}},
		} {
			if _, err := db.Pool.Exec(ctx, q.sql, q.args...); err != nil {
				t.Fatal(err)
			}
		}
		acc[id], users[id] = 1, user
	}
	for in, sids := range acked {
		must(t, rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: writersGroup, Consumer: "w", Streams: []string{in, ">"}}).Err())
		must(t, rdb.XAck(ctx, in, writersGroup, sids...).Err())
	}
	return acc, users
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// On a Redis Cluster the checks read the keys where a server on a cluster
// keeps them: LayoutOf groups the SKUs by partition when the client is a
// cluster client, a clean sale in every partition of every master passes,
// and each corruption of one is caught, named, by the invariant it breaks.
// Read with the single-Redis layout, the same clean sale fails: the keys
// read would be other keys.
func TestReadStoreOnACluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	db := testenv.NewDatabase(t)
	ctx := context.Background()
	if _, err := LayoutOf(ctx, c.Client, c.Prefix); err == nil {
		t.Fatal("LayoutOf on a cluster without a recorded partition count guessed one")
	}
	must(t, c.Client.Set(ctx, c.Prefix+"orders:partitions", 12, 0).Err())
	l, err := LayoutOf(ctx, c.Client, c.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Partitions.Grouped() || l.Partitions.Count() != 12 {
		t.Fatalf("LayoutOf on a cluster: %d partitions, grouped %v; want 12, grouped", l.Partitions.Count(), l.Partitions.Grouped())
	}
	masters := masterOf(t, c)
	var undo func() // undoes a corruption of a stream the next SKUs share
	tests := []struct {
		name    string
		corrupt func(sku string, acc map[string]int64, users map[string]string) string
		fails   string
	}{
		{"clean", func(string, map[string]int64, map[string]string) string { return "" }, ""},
		{"clean_same_entry_id_in_two_partitions", func(string, map[string]int64, map[string]string) string { return "" }, ""},
		{"stock_below_zero", func(sku string, _ map[string]int64, _ map[string]string) string {
			must(t, c.Client.HSet(ctx, l.saleKey(sku), "available", -2).Err())
			return "Redis available -2"
		}, "I1"},
		{"row_lost", func(_ string, acc map[string]int64, _ map[string]string) string {
			id := first(acc)
			if _, err := db.Pool.Exec(ctx, `DELETE FROM orders WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
			return id
		}, "I2"},
		{"persisted_and_dead_lettered", func(sku string, acc map[string]int64, users map[string]string) string {
			id := first(acc)
			var round int64
			must(t, db.Pool.QueryRow(ctx, `SELECT round_id FROM order_items WHERE order_id = $1`, id).Scan(&round))
			must(t, c.Client.XAdd(ctx, &redis.XAddArgs{Stream: l.stream(l.Partitions.Of(sku)) + ":dead", Values: map[string]any{
				"event_order_id": id, "event_user_id": users[id],
				"event_items": fmt.Sprintf(`[{"sku":%q,"quantity":1,"price_cents":100,"round_id":%d}]`, sku, round),
			}}).Err())
			return "both persisted and dead-lettered: " + id
		}, "I3"},
		{"entry_written_as_two_orders", func(_ string, acc map[string]int64, _ map[string]string) string {
			var sid string
			must(t, db.Pool.QueryRow(ctx, `SELECT stream_id FROM orders WHERE id = ANY($1) ORDER BY stream_id LIMIT 1`, keys(acc)).Scan(&sid))
			if _, err := db.Pool.Exec(ctx, `UPDATE orders SET stream_id = $1 WHERE id = ANY($2)`, sid, keys(acc)); err != nil {
				t.Fatal(err)
			}
			return "one stream entry written as two orders: " + l.Prefix
		}, "I3"},
		{"unit_from_nowhere", func(sku string, _ map[string]int64, _ map[string]string) string {
			must(t, c.Client.HIncrBy(ctx, l.saleKey(sku), "available", 1).Err())
			return "available 3"
		}, "I4"},
		{"pending_unacked", func(sku string, _ map[string]int64, _ map[string]string) string {
			stream := l.stream(l.Partitions.Of(sku))
			must(t, c.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: "99999999999999-0", Values: map[string]any{"x": 1}}).Err())
			must(t, c.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: writersGroup, Consumer: "w", Streams: []string{stream, ">"}}).Err())
			undo = func() { must(t, c.Client.XAck(ctx, stream, writersGroup, "99999999999999-0").Err()) }
			return "99999999999999-0"
		}, "I5"},
		{"status_disagrees", func(_ string, acc map[string]int64, _ map[string]string) string {
			id := first(acc)
			must(t, c.Client.HSet(ctx, l.statusKey(id), "status", "expired").Err())
			return id + ": Redis expired, PostgreSQL confirmed"
		}, "I7"},
	}
	onMaster := map[string]bool{}
	for i, tc := range tests {
		// A SKU of its own per case, spread so the cases cover every master.
		sku := skuOnMaster(l, masters, i%3, fmt.Sprintf("cl-%d", i))
		onMaster[masters[keyspace.Slot(l.saleKey(sku))]] = true
		acc, users := clusterSale(t, db, c.Client, l, sku, tc.name == "clean_same_entry_id_in_two_partitions")
		want := tc.corrupt(sku, acc, users)
		st, err := ReadStoreIn(ctx, c.Client, db.Pool, l, sku)
		if err != nil {
			t.Fatal(err)
		}
		if undo != nil {
			undo()
			undo = nil
		}
		bad := Failed(Check(Evidence{Quantity: 5, PerUserLimit: 1, Answers: Answers{Accepted: acc}, Store: st}))
		caught := slices.ContainsFunc(bad, func(r Invariant) bool {
			return strings.HasPrefix(r.Name, tc.fails) && strings.Contains(r.Detail, want)
		})
		switch {
		case tc.fails == "" && len(bad) > 0:
			t.Errorf("%s: %+v", tc.name, bad)
		case tc.fails != "" && !caught:
			t.Errorf("%s: failed %+v, want %s naming %q", tc.name, bad, tc.fails, want)
		}
		if tc.name == "clean" {
			single, err := ReadStoreIn(ctx, c.Client, db.Pool, Layout{Prefix: c.Prefix}, sku)
			if err == nil && len(Failed(Check(Evidence{Quantity: 5, PerUserLimit: 1, Answers: Answers{Accepted: acc}, Store: single}))) == 0 {
				t.Errorf("read with the single-Redis layout, the clean sale on the cluster passed too: the layout is not what is read")
			}
		}
	}
	if len(onMaster) != 3 {
		t.Fatalf("the SKUs fell on %d masters, want 3", len(onMaster))
	}
}

func keys(m map[string]int64) []string {
	var out []string
	for id := range m {
		out = append(out, id)
	}
	return out
}

func first(m map[string]int64) string {
	for id := range m {
		return id
	}
	return ""
}

// masterOf maps each slot to the address of the master that holds it.
func masterOf(t *testing.T, c *testenv.RedisCluster) map[int]string {
	t.Helper()
	slots, err := testenv.ClusterSlots(context.Background(), c.Client)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int]string{}
	for _, s := range slots {
		for slot := s.Start; slot <= s.End; slot++ {
			owner[slot] = s.Nodes[0].Addr
		}
	}
	return owner
}

// skuOnMaster is the first SKU base-0, base-1, ... whose sale key lies on
// the i-th master (masters ordered by address).
func skuOnMaster(l Layout, owner map[int]string, i int, base string) string {
	addrs := map[string]bool{}
	for _, a := range owner {
		addrs[a] = true
	}
	var sorted []string
	for a := range addrs {
		sorted = append(sorted, a)
	}
	slices.Sort(sorted)
	for n := 0; ; n++ {
		sku := fmt.Sprintf("%s-%d", base, n)
		if owner[keyspace.Slot(l.saleKey(sku))] == sorted[i] {
			return sku
		}
	}
}
