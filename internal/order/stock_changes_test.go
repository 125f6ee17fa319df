package order_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
)

// changes subscribes to every SKU's changes channel of the test's prefix.
func changes(t *testing.T, s *liveStock) <-chan *redis.Message {
	t.Helper()
	ps := s.r.Client.PSubscribe(context.Background(), s.ChangesPattern())
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(context.Background()); err != nil { // the confirmation
		t.Fatal(err)
	}
	return ps.Channel()
}

func nextChange(t *testing.T, s *liveStock, ch <-chan *redis.Message) inventory.Change {
	t.Helper()
	select {
	case m := <-ch:
		c, err := s.ParseChange(m.Channel, m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no stock change published")
	}
	return inventory.Change{}
}

// Every change of live stock publishes the state it leaves, in order:
// seeding, a reservation (the order package's script), a release, a
// release of the same order again (nothing moves, nothing published), and
// closing.
func TestStockChangesArePublished(t *testing.T) {
	t.Parallel()
	s := newLiveStock(t)
	ch := changes(t, s)
	ctx := context.Background()
	starts := time.Now().Add(-time.Minute).Truncate(time.Millisecond).UTC()
	ends := starts.Add(time.Hour)
	err := s.OpenRound(ctx, "p1", inventory.LiveRound{Round: 7, Quantity: 10, PerUserLimit: 0, StartsAt: starts, EndsAt: ends, PriceCents: 100})
	if err != nil {
		t.Fatal(err)
	}
	// The seeding says the round has no waiting room; later changes of
	// the round leave that to it.
	want := inventory.Change{SKU: "p1", Round: 7, Available: 10, StartsAt: starts, EndsAt: ends, RoomKnown: true}
	if got := nextChange(t, s, ch); got != want {
		t.Fatalf("seed published %+v, want %+v", got, want)
	}
	want.RoomKnown = false
	rel, err := s.buy("u1", order.Line{SKU: "p1", Quantity: 3})
	if err != nil {
		t.Fatal(err)
	}
	want.Available = 7
	if got := nextChange(t, s, ch); got != want {
		t.Fatalf("purchase published %+v, want %+v", got, want)
	}
	for range 2 {
		if _, err := s.Release(ctx, rel); err != nil {
			t.Fatal(err)
		}
	}
	want.Available = 10
	if got := nextChange(t, s, ch); got != want {
		t.Fatalf("release published %+v, want %+v", got, want)
	}
	if err := s.Close(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	// The second release gave nothing back and published nothing: the
	// next message is the close.
	if got := nextChange(t, s, ch); got != (inventory.Change{SKU: "p1"}) {
		t.Fatalf("close published %+v, want no sale", got)
	}
}
