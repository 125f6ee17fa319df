// Package livetest holds internal/live's tests through the whole application
// (shoptest), so live's own tests build only live and what it imports.
package livetest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

// The application on a 3-master cluster (SHOP_REDIS_CLUSTER, SKU keys
// tagged by their partition): /readyz pings every master, the catalog
// reads live stock across masters, and a SKU's stock changes, published
// by the seed script on its master, reach the live stream's pattern
// subscription.
func TestLiveStockOnACluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	a := shoptest.OnCluster(t, c, nil, nil)
	if r := a.Do(t, http.MethodGet, "/readyz", "", ""); r.Status != http.StatusOK {
		t.Fatalf("readyz: %d %s", r.Status, r.Body)
	}
	base := a.Serve(t)
	slots := map[int64]bool{}
	for _, sku := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
		a.Sale(t, sku, 100, 5, 0)
		slots[c.Slot(t, a.Stock.SaleKey(sku))] = true
	}
	if len(slots) < 3 {
		t.Fatalf("6 SKUs in %d slots", len(slots))
	}
	avail, err := a.Stock.Available(context.Background(), "c1", "c2", "c3", "c4", "c5", "c6")
	if err != nil || len(avail) != 6 || avail[5] != 5 {
		t.Fatalf("available over the masters: %v %v", avail, err)
	}
	for _, sku := range []string{"c1", "c4", "c6"} {
		s := open(t, base, sku)
		if e := first(t, s); e.Available != 5 {
			t.Fatalf("%s: first event %+v", sku, e)
		}
		a.Round(t, sku, inventory.Seed{Quantity: 9})
		if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 9 }); !ok {
			t.Fatalf("%s: the new round was not streamed", sku)
		}
	}
}

// On a cluster the hub holds a sharded subscription (SSUBSCRIBE) per
// watched SKU, on the SKU's master, and no ordinary or pattern one: a
// change of a SKU on each of the three masters reaches its stream as a
// message; the subscription stays while a stream of the SKU is open,
// comes back after its connection is killed, and goes with the last
// stream.
func TestShardedSubscriptionsFollowTheWatchers(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	ctx := context.Background()
	a := shoptest.OnCluster(t, c, nil, nil)
	base := a.Serve(t)
	skus, owners := skusOnEveryMaster(t, c, a.Stock)
	for _, sku := range skus {
		a.Sale(t, sku, 100, 5, 0)
	}
	sharded := func(sku string) bool {
		chans, err := owners[sku].PubSubShardChannels(ctx, c.Prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(chans, a.Stock.ChangesChannel(sku))
	}
	messages := func() float64 { return metric(t, a, "shop_live_messages_total", "") }
	streams := map[string][2]*openapitest.Stream{}
	for i, sku := range skus {
		s1, s2 := open(t, base, sku), open(t, base, sku)
		streams[sku] = [2]*openapitest.Stream{s1, s2}
		for _, s := range streams[sku] {
			if e := first(t, s); e.Available != 5 {
				t.Fatalf("%s: first event %+v", sku, e)
			}
		}
		waitFor(t, func() bool { return sharded(sku) })
		// The stream's SKU is subscribed on its master: the change made now
		// arrives as a message.
		seen := messages()
		a.Round(t, sku, inventory.Seed{Quantity: 10 + i})
		for _, s := range streams[sku] {
			if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == int64(10+i) }); !ok {
				t.Fatalf("%s: the new round was not streamed", sku)
			}
		}
		waitFor(t, func() bool { return messages() > seen })
	}
	if err := c.Client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		chans, err := m.PubSubChannels(ctx, "*:changed").Result()
		if err != nil || len(chans) > 0 {
			return fmt.Errorf("%s: ordinary subscriptions %v %v", m.Options().Addr, chans, err)
		}
		if n, err := m.PubSubNumPat(ctx).Result(); err != nil || n != 0 {
			return fmt.Errorf("%s: %d pattern subscriptions %v", m.Options().Addr, n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// One of two streams leaves: the other still hears the changes.
	sku := skus[0]
	streams[sku][0].Close()
	waitFor(t, func() bool { return metric(t, a, "shop_live_streams", "") == float64(2*len(skus)-1) })
	seen := messages()
	a.Round(t, sku, inventory.Seed{Quantity: 20})
	if _, ok := streams[sku][1].Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 20 }); !ok {
		t.Fatalf("%s: the remaining stream missed the new round", sku)
	}
	waitFor(t, func() bool { return messages() > seen })

	// The subscription connections are killed: go-redis reconnects and the
	// hub's channels are subscribed again; what changed meanwhile is read.
	if err := c.Client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ClientKillByFilter(ctx, "TYPE", "pubsub").Err()
	}); err != nil {
		t.Fatal(err)
	}
	a.Round(t, sku, inventory.Seed{Quantity: 21})
	if _, ok := streams[sku][1].Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 21 }); !ok {
		t.Fatalf("%s: the round opened across the reconnect was not streamed", sku)
	}
	for _, sku := range skus {
		waitFor(t, func() bool { return sharded(sku) })
	}
	seen = messages()
	a.Round(t, sku, inventory.Seed{Quantity: 22})
	if _, ok := streams[sku][1].Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 22 }); !ok {
		t.Fatalf("%s: the round opened after the reconnect was not streamed", sku)
	}
	waitFor(t, func() bool { return messages() > seen })

	// The last streams leave: the subscriptions go.
	for _, sku := range skus {
		for _, s := range streams[sku] {
			s.Close()
		}
	}
	for _, sku := range skus {
		waitFor(t, func() bool { return !sharded(sku) })
	}
}

// skusOnEveryMaster returns a SKU on each master of c, and its master.
func skusOnEveryMaster(t *testing.T, c *testenv.RedisCluster, stock *inventory.Stock) ([]string, map[string]*redis.Client) {
	t.Helper()
	var skus []string
	owners, seen := map[string]*redis.Client{}, map[string]bool{}
	for i := 0; len(skus) < len(c.Masters); i++ {
		if i > 1000 {
			t.Fatalf("SKUs on %d masters only", len(seen))
		}
		sku := fmt.Sprintf("s%d", i)
		m, err := c.Client.MasterForKey(context.Background(), stock.SaleKey(sku))
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; !seen[addr] {
			seen[addr] = true
			skus = append(skus, sku)
			owners[sku] = m
		}
	}
	return skus, owners
}

// watching is the app on cluster c through rdb (nil: a client of the
// cluster's own), a shopper's token, and a live stream of sku, a sale of
// 5 units whose first event has arrived.
func watching(t *testing.T, c *testenv.RedisCluster, rdb redis.UniversalClient, email, sku string) (*shoptest.App, string, *openapitest.Stream) {
	t.Helper()
	a := shoptest.OnCluster(t, c, rdb, nil)
	base := a.Serve(t)
	_, tok := a.Shopper(t, email)
	a.Sale(t, sku, 100, 5, 0)
	s := open(t, base, sku)
	if e := first(t, s); e.Available != 5 {
		t.Fatalf("first event %+v", e)
	}
	return a, tok, s
}

// A resharding moves a watched SKU's slot to another master: the old one
// ends the hub's sharded subscription (an sunsubscribe it did not ask
// for), and the SKU's changes are published on the new one from then on.
// The hub subscribes again there, so a purchase made after the move still
// reaches the stream.
func TestShardedSubscriptionFollowsAMovedSlot(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	ctx := context.Background()
	a, tok, s := watching(t, c, nil, "moved@shop.test", "m1")
	const sku = "m1"
	channel := a.Stock.ChangesChannel(sku)
	subscribedOn := func(m *testenv.RedisProcess) bool {
		opts, _ := redis.ParseURL(m.URL)
		node := redis.NewClient(opts)
		defer node.Close()
		chans, err := node.PubSubShardChannels(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(chans, channel)
	}
	slot := c.Slot(t, a.Stock.SaleKey(sku))
	owner := -1
	waitFor(t, func() bool {
		for i, m := range c.Masters {
			if subscribedOn(m) {
				owner = i
				return true
			}
		}
		return false
	})
	to := (owner + 1) % len(c.Masters)
	if from, err := c.MoveSlot(slot, to); err != nil || from != owner {
		t.Fatalf("moving slot %d from master %d to %d: from %d, %v", slot, owner, to, from, err)
	}

	buy(t, a, tok, sku, 2)
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 3 }); !ok {
		t.Fatal("the purchase made after the slot moved was not streamed")
	}
	waitFor(t, func() bool { return subscribedOn(c.Masters[to]) && !subscribedOn(c.Masters[owner]) })
}

// A watched SKU's master hands its slots to its replica (CLUSTER
// FAILOVER, as before a node's drain): a purchase made after it still
// reaches the stream.
func TestShardedSubscriptionFollowsAFailover(t *testing.T) {
	t.Parallel()
	c := testenv.StartClusterWithReplicas(t, 3)
	ctx := context.Background()
	a, tok, s := watching(t, c, nil, "failover@shop.test", "f1")
	const sku = "f1"
	channel := a.Stock.ChangesChannel(sku)
	waitFor(t, func() bool {
		n, err := c.Client.PubSubShardNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 1
	})
	if err := c.Failover(c.Slot(t, a.Stock.SaleKey(sku))); err != nil {
		t.Fatal(err)
	}

	buy(t, a, tok, sku, 2)
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 3 }); !ok {
		t.Fatal("the purchase made after the failover was not streamed")
	}
}

// A watched SKU's master hands its slots to its replica, and the slot map
// of the hub's client goes on naming the old master for longer than the
// hub waits for it to change (every node it asks lags): the hub opens the
// subscription there again, and the demoted master confirms it. That
// confirmation does not settle it: once the map names the new master the
// subscription moves there, and a purchase made after the failover
// reaches the stream.
func TestShardedSubscriptionLeavesADemotedMaster(t *testing.T) {
	t.Parallel()
	c := testenv.StartClusterWithReplicas(t, 3)
	ctx := context.Background()
	// The hub's client reads its slot map through lagging: while it holds
	// a map, that map is the client's word, however often it reloads.
	var lagging atomic.Pointer[[]redis.ClusterSlot]
	opts, err := database.ParseClusterURL(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.ClusterSlots = func(ctx context.Context) ([]redis.ClusterSlot, error) {
		if m := lagging.Load(); m != nil {
			return *m, nil
		}
		return testenv.ClusterSlots(ctx, c.Client)
	}
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	a, tok, s := watching(t, c, rdb, "demoted@shop.test", "d1")
	const sku = "d1"
	channel := a.Stock.ChangesChannel(sku)
	old, err := c.Client.MasterForKey(ctx, channel)
	if err != nil {
		t.Fatal(err)
	}
	subscribers := func(node *redis.Client) int64 {
		n, err := node.PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	waitFor(t, func() bool { return subscribers(old) == 1 })
	slots, err := testenv.ClusterSlots(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	lagging.Store(&slots)
	if err := c.Failover(c.Slot(t, a.Stock.SaleKey(sku))); err != nil {
		t.Fatal(err)
	}
	role, err := old.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) < 3 || role[0] != "slave" {
		t.Fatalf("the old master's ROLE after the failover: %v %v", role, err)
	}
	promoted := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("%s:%d", role[1], role[2])})
	t.Cleanup(func() { _ = promoted.Close() })

	// The demoted master ended the subscription; the hub gave up waiting
	// for the map and subscribed there again, which it confirmed.
	waitFor(t, func() bool { return subscribers(old) == 0 })
	waitFor(t, func() bool { return subscribers(old) == 1 })
	lagging.Store(nil)
	waitFor(t, func() bool { return subscribers(promoted) == 1 && subscribers(old) == 0 })

	buy(t, a, tok, sku, 2)
	if _, ok := s.Until(wait, func(e openapitest.StockEvent) bool { return e.Available == 3 }); !ok {
		t.Fatal("the purchase made after the failover was not streamed")
	}
}
