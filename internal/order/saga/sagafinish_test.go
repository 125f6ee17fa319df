package saga

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/shop-oss/shop/internal/order"
)

// A checkout on a cluster cut between its commit and its finish (the
// placement's goroutine ends there, as a process killed there would): the
// order exists, its lines are still in the cart. A repeat of its
// Idempotency-Key answers the order and takes the order's lines out of
// the cart, leaving a line added since; a second repeat, finding the
// finish marked, leaves the cart alone. A checkout that finished is not
// finished again by its repeat.
func TestRepeatFinishesACheckoutCutBeforeItsFinish(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	u := f.user(t)
	a, b, c := f.skuIn(t, "fin", 2, 10), f.skuIn(t, "fin", 6, 10), f.skuIn(t, "fin", 10, 10)
	lines := []order.Line{{SKU: a, Quantity: 2}, {SKU: b, Quantity: 1}}
	cart := f.cart(t, u, lines...)
	var cut atomic.Bool
	f.saga.InjectFault(func(p Point) {
		if p == BeforeFinish && cut.CompareAndSwap(false, true) {
			runtime.Goexit()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = f.svc.Place(ctx, u, lines, order.PlaceOptions{IdemKey: "k", CartKey: cart})
	}()
	<-done
	if !cut.Load() || f.rdb.HLen(ctx, cart).Val() != 2 {
		t.Fatalf("the checkout was not cut before its finish: cut %v, cart %v", cut.Load(), f.rdb.HGetAll(ctx, cart).Val())
	}
	f.cart(t, u, order.Line{SKU: c, Quantity: 1}) // added since
	cartNow := append(lines, order.Line{SKU: c, Quantity: 1})
	p1, err := f.svc.Place(ctx, u, cartNow, order.PlaceOptions{IdemKey: "k", CartKey: cart})
	if err != nil || !p1.Replayed {
		t.Fatalf("repeat: %+v %v, want the order replayed", p1, err)
	}
	if got := f.rdb.HGetAll(ctx, cart).Val(); len(got) != 1 || got[c] != "1" {
		t.Fatalf("cart after the repeat: %v, want only %s:1", got, c)
	}
	if ids := f.rdb.ZRange(ctx, f.saga.keys.Pending(u), 0, -1).Val(); len(ids) != 1 || ids[0] != p1.OrderID {
		t.Fatalf("pending index %v, want %s", ids, p1.OrderID)
	}
	f.cart(t, u, lines...)
	p2, err := f.svc.Place(ctx, u, cartNow, order.PlaceOptions{IdemKey: "k", CartKey: cart})
	if err != nil || !p2.Replayed || p2.OrderID != p1.OrderID {
		t.Fatalf("second repeat: %+v %v, want %s replayed", p2, err, p1.OrderID)
	}
	if n := f.rdb.HLen(ctx, cart).Val(); n != 3 {
		t.Fatalf("the second repeat finished again: %d cart lines left, want 3", n)
	}
	if av := f.available(t, a); av != 8 {
		t.Fatalf("%s available %d, want 8: one order", a, av)
	}
}
