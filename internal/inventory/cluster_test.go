package inventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// On a Redis Cluster a SKU's live keys share the slot of its order
// partition's tag, so every stock script (seed, price, release with a
// guard and an outbox on the partition's stream, close) runs there; the
// slots are Redis's (CLUSTER KEYSLOT), not only this package's arithmetic.
func TestStockScriptsRunOnACluster(t *testing.T) {
	t.Parallel()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	parts := keyspace.NewPartitions(6, true)
	s := NewPartitionedStock(rdb, c.Prefix, parts)
	for i := range 12 {
		sku := fmt.Sprintf("sku-%d", i)
		tag := parts.Tag(parts.Of(sku))
		want := c.Slot(t, tag)
		// The keys of every script below, as the calls build them.
		for _, key := range []string{s.SaleKey(sku), s.BuyersKey(sku), s.releasedKey(sku), s.ChangesChannel(sku),
			s.SaleKey(sku) + ":noguard", s.SaleKey(sku) + ":nooutbox", c.Prefix + "orders:" + tag} {
			if got := c.Slot(t, key); got != want {
				t.Fatalf("%s: slot %d, want %d (the partition tag %s)", key, got, want, tag)
			}
		}
		if err := s.OpenRound(ctx, sku, LiveRound{Round: 1, Quantity: 5, PerUserLimit: 2, PriceCents: 100}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetPrice(ctx, sku, 200); err != nil {
			t.Fatal(err)
		}
		rdb.HIncrBy(ctx, s.SaleKey(sku), "available", -2)
		rdb.HIncrBy(ctx, s.BuyersKey(sku), "u1", 2)
		guard := s.SaleKey(sku) + ":order-o1" // a caller's hash tagged like the SKU
		rdb.HSet(ctx, guard, "status", "pending")
		r, err := s.Release(ctx, Release{OrderID: "o1", UserID: "u1", Lines: []ReleaseLine{{SKU: sku, Quantity: 2, RoundID: 1}},
			Guard:  &Guard{Key: guard, Field: "status", From: []string{"pending"}, To: "cancelled"},
			Outbox: &Outbox{Stream: c.Prefix + "orders:" + tag, Values: []string{"kind", "transition"}}})
		if err != nil || r.Units != 2 {
			t.Fatalf("release of %s: %+v %v", sku, r, err)
		}
		live, ok, err := s.Live(ctx, sku)
		if err != nil || !ok || live.Available != 5 || live.PriceCents != 200 {
			t.Fatalf("live %s: %+v %v %v", sku, live, ok, err)
		}
	}
	// Available pipelines over every master.
	avail, err := s.Available(ctx, "sku-0", "sku-1", "sku-2", "sku-3", "nothing")
	if err != nil || len(avail) != 5 || avail[0] != 5 || avail[4] != 0 {
		t.Fatalf("available: %v %v", avail, err)
	}
	if err := s.Close(ctx, "sku-0"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Live(ctx, "sku-0"); ok {
		t.Fatal("sku-0's sale outlived Close")
	}
}

// The change messages of a grouped SKU name it: the live hub's pattern
// matches its channel and ParseChange reads the SKU back; a channel whose
// tag is not the SKU's partition is refused.
func TestGroupedChangesChannel(t *testing.T) {
	parts := keyspace.NewPartitions(4, true)
	s := NewPartitionedStock(nil, "p:", parts)
	ch := s.ChangesChannel("a-1")
	if c, err := s.ParseChange(ch, "1 2 0 0"); err != nil || c.SKU != "a-1" || c.Available != 2 {
		t.Fatalf("ParseChange(%s): %+v %v", ch, c, err)
	}
	other := parts.Tag((parts.Of("a-1") + 1) % 4)
	if _, err := s.ParseChange("p:sale:"+other+"a-1:changed", "1 2 0 0"); err == nil {
		t.Fatal("a channel in another partition's tag was taken for a-1's")
	}
	if _, err := NewPartitionedStock(nil, "p:", parts).ParseChange("p:sale:{a-1}:changed", "1 2 0 0"); err == nil {
		t.Fatal("an ungrouped channel was read by a grouped stock")
	}
}

// On a cluster every stock change is SPUBLISHed, on the master of the
// SKU's slot only: seed, release, restore and close, for SKUs on each of
// the three masters, reach a sharded subscriber (SSUBSCRIBE) in order, and
// the masters' command counts show SPUBLISH once per change and no
// PUBLISH (which the cluster bus would broadcast to every node).
func TestStockChangesAreShardedOnACluster(t *testing.T) {
	t.Parallel()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	s := NewPartitionedStock(rdb, c.Prefix, keyspace.NewPartitions(12, true))
	if !s.ShardedChanges() || s.PublishCommand() != "SPUBLISH" {
		t.Fatalf("a grouped stock publishes with %s", s.PublishCommand())
	}
	skus := skusOnEveryMaster(t, c, s)
	if err := c.Client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ConfigResetStat(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	subs := map[string]*redis.PubSub{}
	for _, sku := range skus {
		ps := rdb.SSubscribe(ctx, s.ChangesChannel(sku))
		t.Cleanup(func() { _ = ps.Close() })
		if _, err := ps.Receive(ctx); err != nil { // the confirmation
			t.Fatal(err)
		}
		subs[sku] = ps
	}
	for _, sku := range skus {
		if err := s.OpenRound(ctx, sku, LiveRound{Round: 1, Quantity: 5, PerUserLimit: 2, PriceCents: 100}); err != nil {
			t.Fatal(err)
		}
		rdb.HIncrBy(ctx, s.SaleKey(sku), "available", -2)
		rdb.HIncrBy(ctx, s.BuyersKey(sku), "u1", 2)
		if _, err := s.Release(ctx, Release{OrderID: "o1", UserID: "u1",
			Lines: []ReleaseLine{{SKU: sku, Quantity: 2, RoundID: 1}}}); err != nil {
			t.Fatal(err)
		}
		fence, err := s.ReadFence(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Restore(ctx, sku, fence, Restored{LiveRound: LiveRound{Round: 1, Quantity: 5, Available: 4,
			PerUserLimit: 2, PriceCents: 100}, Buyers: map[string]int64{"u2": 1}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx, sku); err != nil {
			t.Fatal(err)
		}
	}
	// Four changes per SKU, each SPUBLISHed once on its SKU's master.
	want := map[string]int{}
	for _, sku := range skus {
		m, err := c.Client.MasterForKey(ctx, s.SaleKey(sku))
		if err != nil {
			t.Fatal(err)
		}
		want[m.Options().Addr] += 4
	}
	if err := c.Client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		stats, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		if n := commandCalls(stats, "publish"); n != 0 {
			return fmt.Errorf("%s: %d PUBLISH calls", m.Options().Addr, n)
		}
		if n := commandCalls(stats, "spublish"); n != want[m.Options().Addr] {
			return fmt.Errorf("%s: %d SPUBLISH calls, want %d", m.Options().Addr, n, want[m.Options().Addr])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, sku := range skus {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a bound on a hang, not a timing
		for i, payload := range []string{"1 5 0 0 2 0", "1 5 0 0 2", "1 4 0 0 2 0", closedMessage} {
			m, err := subs[sku].ReceiveMessage(rctx)
			if err != nil || m.Channel != s.ChangesChannel(sku) || m.Payload != payload {
				t.Fatalf("%s: change %d: %+v %v, want %q", sku, i, m, err, payload)
			}
		}
		cancel()
	}
}

// skusOnEveryMaster returns SKUs whose keys fall on each master of c, two
// per master.
func skusOnEveryMaster(t *testing.T, c *testenv.RedisCluster, s *Stock) []string {
	t.Helper()
	per := map[string]int{}
	var skus []string
	for i := 0; len(skus) < 2*len(c.Masters); i++ {
		sku := fmt.Sprintf("sku-%d", i)
		m, err := c.Client.MasterForKey(context.Background(), s.SaleKey(sku))
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; per[addr] < 2 {
			per[addr]++
			skus = append(skus, sku)
		}
		if i > 1000 {
			t.Fatalf("SKUs on %d masters only: %v", len(per), per)
		}
	}
	return skus
}

// commandCalls reads a command's call count from INFO commandstats.
func commandCalls(stats, cmd string) int {
	for _, line := range strings.Split(stats, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}
