package order

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database/dbtest"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// On a cluster a partition's stream, due set and dead letters share the
// slot of every SKU in it (CLUSTER KEYSLOT, over the real key functions),
// and the writer's per-partition work (group creation, reads, claims,
// trimming, forgetting consumers, sampling) runs on every master.
func TestPartitionKeysAndWriterStreamsOnACluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	ctx := context.Background()
	rdb := dbtest.OpenCluster(t, c)
	parts := keyspace.NewPartitions(6, true)
	stock := inventory.NewPartitionedStock(rdb, c.Prefix, parts)
	k := keys{c.Prefix, parts}
	for i := range 30 {
		sku := fmt.Sprintf("sku-%d", i)
		p := parts.Of(sku)
		want := c.Slot(t, stock.SaleKey(sku))
		for _, key := range []string{k.stream(p), k.due(p), k.dead(p), stock.BuyersKey(sku), stock.ReleasedKey(sku),
			k.holds(p), k.hold(p, "01a232c2-00db-7cbc-85b3-7b9f303d4d05"), k.settled(p), k.owed(p), k.releases(p)} {
			if got := c.Slot(t, key); got != want {
				t.Fatalf("%s: slot %d, want %d (%s's)", key, got, want, sku)
			}
		}
	}

	w := NewWriter(nil, rdb, c.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(),
		WriterOptions{Consumer: "w", Partitions: parts})
	for p := range parts.Count() {
		if err := w.ensureGroup(ctx, p); err != nil {
			t.Fatal(err)
		}
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.stream(p), Values: []string{"x", "1"}})
		loop := w.sibling(p, 0)
		msgs, err := loop.read(ctx, ">", -1)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("partition %d: read %v %v", p, msgs, err)
		}
		if err := rdb.XAck(ctx, k.stream(p), group, msgs[0].ID).Err(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: k.stream(p), Group: group,
			Consumer: "w", Start: "0-0", Count: 10}).Result(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.forgetConsumers(ctx, p); err != nil {
			t.Fatalf("partition %d: forget: %v", p, err)
		}
	}
	// Each releases log has an entry older than SettledRetention and a new
	// one: the old one goes with the written entries.
	now := rdb.Time(ctx).Val()
	for p := range parts.Count() {
		old := fmt.Sprintf("%d-0", now.Add(-SettledRetention-time.Minute).UnixMilli())
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.releases(p), ID: old, Values: []string{"order_id", "old"}})
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.releases(p), Values: []string{"order_id", "new"}})
	}
	if n, err := w.Trim(ctx); err != nil || n != int64(2*parts.Count()) {
		t.Fatalf("trim: %d %v, want one written entry and one old release per partition", n, err)
	}
	for p := range parts.Count() {
		if got := rdb.XRange(ctx, k.releases(p), "-", "+").Val(); len(got) != 1 || got[0].Values["order_id"] != "new" {
			t.Fatalf("partition %d: releases log %v after the trim, want the new entry only", p, got)
		}
	}
	if err := w.sample(ctx); err != nil {
		t.Fatalf("sample: %v", err)
	}
}
