package writer

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// On a cluster the writer's per-partition work (group creation, reads,
// claims, trimming, forgetting consumers, sampling) runs on every master.
// The slots of the keys it works on: order's TestPartitionKeysOnACluster.
func TestWriterStreamsOnACluster(t *testing.T) {
	t.Parallel()
	c, rdb, parts := ordertesting.Cluster(t, 6)
	ctx := context.Background()
	k := orderkey.New(c.Prefix, parts)

	w := New(nil, rdb, c.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(),
		Options{Consumer: "w", Partitions: parts})
	for p := range parts.Count() {
		if err := w.ensureGroup(ctx, p); err != nil {
			t.Fatal(err)
		}
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Stream(p), Values: []string{"x", "1"}})
		loop := w.sibling(p, 0)
		msgs, err := loop.read(ctx, ">", -1)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("partition %d: read %v %v", p, msgs, err)
		}
		if err := rdb.XAck(ctx, k.Stream(p), group, msgs[0].ID).Err(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: k.Stream(p), Group: group,
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
		old := fmt.Sprintf("%d-0", now.Add(-ledger.SettledRetention-time.Minute).UnixMilli())
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Releases(p), ID: old, Values: []string{"order_id", "old"}})
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Releases(p), Values: []string{"order_id", "new"}})
	}
	if n, err := w.Trim(ctx); err != nil || n != int64(2*parts.Count()) {
		t.Fatalf("trim: %d %v, want one written entry and one old release per partition", n, err)
	}
	for p := range parts.Count() {
		if got := rdb.XRange(ctx, k.Releases(p), "-", "+").Val(); len(got) != 1 || got[0].Values["order_id"] != "new" {
			t.Fatalf("partition %d: releases log %v after the trim, want the new entry only", p, got)
		}
	}
	if err := w.sample(ctx); err != nil {
		t.Fatalf("sample: %v", err)
	}
}
