package writer

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
)

// corrupt replaces the stream entry of a placed order by a copy whose
// items do not parse: the order's status hash and its buyer's pending
// index stay as the reserve script wrote them.
func (f *fixture) corrupt(t *testing.T, p order.Placed) {
	t.Helper()
	ctx := context.Background()
	stream := f.keys.Stream(0)
	msgs, err := f.R.Client.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Values["order_id"] != p.OrderID {
			continue
		}
		m.Values["items"] = "[{not json"
		f.R.Client.XDel(ctx, stream, m.ID)
		f.R.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: m.Values})
		return
	}
	t.Fatalf("no stream entry for order %s", p.OrderID)
}

// An entry dead-lettered for not parsing still names its order and buyer:
// the buyer reads its order "rejected" (not "pending" for a week) and no
// longer finds it among the pending ones.
func TestDeadLetteredOrderIsRejectedEvenWhenItsEntryDoesNotParse(t *testing.T) {
	t.Parallel()
	f, _, u := newSale(t, 3)
	ctx := context.Background()
	bad := f.place(t, u, "s", 1)
	good := f.place(t, u, "s", 1)
	f.corrupt(t, bad)
	w := f.drain(t, "w1", Options{MaxDeliveries: 2})
	o, err := f.svc.Get(ctx, u, bad.OrderID)
	if err != nil || o.Status != order.StatusRejected {
		t.Fatalf("the dead-lettered order reads %+v, %v; want rejected", o, err)
	}
	if _, err := f.R.Client.ZScore(ctx, f.keys.Pending(u), bad.OrderID).Result(); err != redis.Nil {
		t.Errorf("the rejected order is still in its buyer's pending index (%v)", err)
	}
	if o, err := f.svc.Get(ctx, u, good.OrderID); err != nil || o.Status != order.StatusConfirmed {
		t.Errorf("the good order reads %+v, %v; want confirmed", o, err)
	}
	if got := counterValue(t, w.m.deadLetters); got != 1 {
		t.Errorf("dead-letter metric = %v, want 1", got)
	}
	if got := counterValue(t, w.m.unowned); got != 0 {
		t.Errorf("unowned dead-letter metric = %v, want 0", got)
	}
}

// An entry that names no readable order id (or no buyer) marks nothing:
// the dead-letter stream keeps it whole, and the metric of dead letters no
// buyer hears of counts it.
func TestUnownedEntryIsDeadLetteredWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	stream := f.keys.Stream(0)
	u := f.User(t)
	for _, v := range []map[string]any{
		{"order_id": "nope", "user_id": u, "qty": "x"},
		{"order_id": "6f1c1fd4-8a54-4f5b-9d3e-5d43b6e1f6a1", "user_id": "someone"},
	} {
		f.R.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: v})
	}
	w := f.drain(t, "w1", Options{MaxDeliveries: 2})
	dead := f.R.Client.XRange(ctx, f.keys.Dead(0), "-", "+").Val()
	if len(dead) != 2 || dead[0].Values["event_order_id"] != "nope" || dead[0].Values["event_qty"] != "x" ||
		dead[1].Values["event_user_id"] != "someone" {
		t.Fatalf("dead letters = %v, want both entries whole", dead)
	}
	if n := f.R.Client.Exists(ctx, f.keys.Status("6f1c1fd4-8a54-4f5b-9d3e-5d43b6e1f6a1")).Val(); n != 0 {
		t.Errorf("a status was written for an entry with no readable buyer")
	}
	if got := counterValue(t, w.m.unowned); got != 2 {
		t.Errorf("unowned dead-letter metric = %v, want 2", got)
	}
	if got := counterValue(t, w.m.deadLetters); got != 2 {
		t.Errorf("dead-letter metric = %v, want 2", got)
	}
}
