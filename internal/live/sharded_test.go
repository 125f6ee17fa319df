package live

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// subscribedOnCluster is a hub on cluster client rdb, not running, with
// one stream of sku subscribed, a round 1 of 5 units open.
func subscribedOnCluster(t *testing.T, c *testenv.RedisCluster, rdb redis.UniversalClient, sku string) (*inventory.Stock, *Hub, *subscriber) {
	t.Helper()
	stock := inventory.NewPartitionedStock(rdb, c.Prefix, keyspace.NewPartitions(12, true))
	if err := stock.OpenRound(context.Background(), sku, inventory.LiveRound{Round: 1, Quantity: 5}); err != nil {
		t.Fatal(err)
	}
	h := New(rdb, stock, Options{Interval: time.Nanosecond}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	s, err := h.subscribe(sku, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.unsubscribe(s) })
	return stock, h, s
}

// handedRound2 runs the hub until s is handed round 2 with 9 units,
// failing with hang if it never is.
func handedRound2(t *testing.T, h *Hub, s *subscriber, hang string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case got := <-s.box:
		if got.Round != 2 || got.Available != 9 {
			t.Fatalf("the stream was handed %+v, want round 2 with 9", got)
		}
	case <-time.After(20 * time.Second): // a bound on a hang, not a timing
		t.Fatal(hang)
	}
}

// A SKU's first stream reads its state before the hub's sharded
// subscription to it is in place; a change made in between is published
// to nobody. The confirmation of the subscription reads the SKU again, so
// the stream still gets the change.
func TestShardedSubscriptionReadsTheSKUAgainWhenConfirmed(t *testing.T) {
	t.Parallel()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	stock, h, s := subscribedOnCluster(t, c, rdb, "g1")
	first, err := stock.Current(ctx, "g1")
	if err != nil || first.Available != 5 {
		t.Fatalf("first read %+v %v", first, err)
	}
	h.started(s, first)
	// The hub is not running: nobody is subscribed to this change.
	if err := stock.OpenRound(ctx, "g1", inventory.LiveRound{Round: 2, Quantity: 9}); err != nil {
		t.Fatal(err)
	}
	handedRound2(t, h, s, "the change made before the subscription never reached the stream")
}

// The hub's cluster client still maps a SKU's slot to the master it left
// (nothing it sent since met a MOVED): the first SSUBSCRIBE goes there,
// meets a MOVED that go-redis never passes on, and is never confirmed. The
// hub opens the connection again, the slot map read anew, and the stream
// gets the change made meanwhile.
func TestShardedSubscriptionRetriesAnUnconfirmedSubscribe(t *testing.T) {
	t.Parallel()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	stock, h, s := subscribedOnCluster(t, c, rdb, "r1")
	h.started(s, inventory.Change{SKU: "r1", Round: 1, Available: 5})

	// The slot moves behind the hub's client; the change is made through
	// another, so that the hub's never meets a MOVED.
	slot := c.Slot(t, stock.SaleKey("r1"))
	owner, err := rdb.MasterForKey(ctx, stock.SaleKey("r1"))
	if err != nil {
		t.Fatal(err)
	}
	to := 0
	for i, m := range c.Masters {
		if m.URL != "redis://"+owner.Options().Addr+"/0" {
			to = i
		}
	}
	if _, err := c.MoveSlot(slot, to); err != nil {
		t.Fatal(err)
	}
	other := testenv.OpenCluster(t, c)
	if err := inventory.NewPartitionedStock(other, c.Prefix, keyspace.NewPartitions(12, true)).
		OpenRound(ctx, "r1", inventory.LiveRound{Round: 2, Quantity: 9}); err != nil {
		t.Fatal(err)
	}

	handedRound2(t, h, s, "the subscription was never confirmed, nor the SKU read again")
}

// A change published while a resync reads a SKU (the subscription is in
// place by then) is as new as the read or newer: the streams keep it, and
// are not rolled back to the read's state.
func TestResyncKeepsAChangeHeardDuringItsRead(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx := context.Background()
	stock := inventory.NewStock(r.Client, r.Prefix)
	if err := stock.OpenRound(ctx, "p1", inventory.LiveRound{Round: 1, Quantity: 5}); err != nil {
		t.Fatal(err)
	}
	h := New(r.Client, stock, Options{Interval: time.Nanosecond}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	s, err := h.subscribe("p1", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.unsubscribe(s) })
	h.resyncRead = func(sku string) {
		// The last unit sells once the read has its 5: the change is heard.
		h.receive(&redis.Message{Channel: stock.ChangesChannel(sku), Payload: "1 0 0 0"})
	}
	h.resyncSKUs(ctx, []string{"p1"})
	waitHandedOut(t, h, "p1")
	if got := <-s.box; got.Round != 1 || got.Available != 0 {
		t.Fatalf("the stream holds %+v, want the change heard during the read (0 left)", got)
	}
}
