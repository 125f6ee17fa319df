package cart

import (
	"context"
	"errors"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"reflect"
	"testing"
	"time"
)

// One line that cannot be had refuses the whole checkout: no stock taken
// from the others, no order event, the cart as it was.
func TestCheckoutAllOrNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.sale(t, "plenty", 100, 50, 0)
	f.sale(t, "short", 100, 1, 0)
	f.sale(t, "limited", 100, 50, 1)
	f.product(t, "unsold", 100) // in the catalog, never put on sale
	f.sale(t, "later", 100, 50, 0)
	if _, err := f.sales.Open(ctx, "later", inventory.Seed{Quantity: 50, StartsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		lines map[string]int
		code  string
		skus  []string
	}{
		{"one_line_short", map[string]int{"plenty": 2, "short": 2}, apperr.CodeOutOfStock, []string{"short"}},
		{"over_limit", map[string]int{"plenty": 2, "limited": 2}, apperr.CodeLimitExceeded, []string{"limited"}},
		{"never_on_sale", map[string]int{"plenty": 1, "unsold": 1}, apperr.CodeSaleNotActive, []string{"unsold"}},
		{"not_started", map[string]int{"later": 1, "plenty": 1}, apperr.CodeSaleNotActive, []string{"later"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := f.user(t)
			for sku, n := range tc.lines {
				f.add(t, u, sku, n)
			}
			before := f.hash(t, u)
			_, err := f.svc.Checkout(ctx, u, "", nil)
			e := wantCode(t, err, tc.code)
			if !reflect.DeepEqual(e.Extra["skus"], tc.skus) {
				t.Errorf("skus = %v, want %v", e.Extra["skus"], tc.skus)
			}
			if after := f.hash(t, u); !reflect.DeepEqual(after, before) {
				t.Errorf("cart changed by a refused checkout: %v, was %v", after, before)
			}
		})
	}
	if a, s := f.available(t, "plenty"), f.available(t, "short"); a != 50 || s != 1 || f.streamLen(t) != 0 {
		t.Fatalf("refused checkouts took stock (plenty %d, short %d) or enqueued %d orders", a, s, f.streamLen(t))
	}
	if n := f.metric(t, "shop_checkouts_total", "outcome", "out_of_stock"); n != 1 {
		t.Errorf("checkouts{outcome=out_of_stock} = %v, want 1", n)
	}
}

// A checkout becomes one confirmed order with every line at the sale
// round's price, and the cart is gone.
func TestCheckoutToConfirmedOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	mugs := f.sale(t, "mug", 1250, 10, 0)
	teas := f.sale(t, "tea", 399, 10, 0)
	u := f.user(t)
	f.add(t, u, "tea", 3)
	f.add(t, u, "mug", 2)
	p, err := f.svc.Checkout(ctx, u, "", nil)
	if err != nil || p.Status != order.StatusPending || p.Replayed {
		t.Fatalf("checkout = %+v %v", p, err)
	}
	if n := f.r.Client.Exists(ctx, f.svc.key(u)).Val(); n != 0 {
		t.Fatal("the cart outlived its checkout")
	}
	f.drain(t)
	o, err := f.orders.Get(ctx, u, p.OrderID)
	want := []order.Item{{SKU: "mug", Quantity: 2, PriceCents: 1250}, {SKU: "tea", Quantity: 3, PriceCents: 399}}
	if err != nil || o.Status != order.StatusConfirmed || !reflect.DeepEqual(o.Items, want) || o.TotalCents != 2*1250+3*399 {
		t.Fatalf("order = %+v %v, want confirmed %v total %d", o, err, want, 2*1250+3*399)
	}
	soldMugs := f.count(t, `SELECT sold FROM sale_rounds WHERE id = $1`, mugs)
	soldTeas := f.count(t, `SELECT sold FROM sale_rounds WHERE id = $1`, teas)
	if soldMugs != 2 || soldTeas != 3 || f.available(t, "mug") != 8 || f.available(t, "tea") != 7 {
		t.Fatalf("sold %d mugs, %d teas; available %d, %d", soldMugs, soldTeas, f.available(t, "mug"), f.available(t, "tea"))
	}
	_, err = f.svc.Checkout(ctx, u, "", nil)
	wantCode(t, err, apperr.CodeCartEmpty)
}

// A repeat with the same Idempotency-Key returns the first answer, even
// though the first checkout emptied the cart, and buys nothing more.
func TestCheckoutIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.sale(t, "p", 100, 10, 0)
	u := f.user(t)
	f.add(t, u, "p", 2)
	first, err := f.svc.Checkout(ctx, u, "pay-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.Checkout(ctx, u, "pay-1", nil)
	if err != nil || again.OrderID != first.OrderID || !again.Replayed {
		t.Fatalf("repeat on an empty cart = %+v %v, want order %s", again, err, first.OrderID)
	}
	f.add(t, u, "p", 1)
	if again, err = f.svc.Checkout(ctx, u, "pay-1", nil); err != nil || again.OrderID != first.OrderID {
		t.Fatalf("repeat on a refilled cart = %+v %v, want order %s", again, err, first.OrderID)
	}
	if f.available(t, "p") != 8 || len(f.hash(t, u)) != 1 || f.streamLen(t) != 1 {
		t.Fatalf("a repeat bought again: available %d", f.available(t, "p"))
	}
	if err := f.svc.Clear(ctx, u); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Checkout(ctx, u, "pay-2", nil)
	wantCode(t, err, apperr.CodeCartEmpty)
	if f.metric(t, "shop_checkouts_total", "outcome", "replayed") != 2 || f.metric(t, "shop_checkouts_total", "outcome", "accepted") != 1 {
		t.Error("checkouts not counted by outcome")
	}
}

// When the shopper changes the cart between the read and the script, the
// checkout reads it again and buys what the cart holds then; a cart that
// changes under every attempt gets a conflict and nothing is bought.
func TestCheckoutRereadsAChangedCart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.sale(t, "p", 100, 100, 0)
	u := f.user(t)
	f.add(t, u, "p", 1)
	calls := 0
	f.svc.beforePlace = func() {
		if calls++; calls == 1 {
			f.add(t, u, "p", 1)
		}
	}
	if _, err := f.svc.Checkout(ctx, u, "", nil); err != nil || calls != 2 || f.available(t, "p") != 98 {
		t.Fatalf("checkout = %v after %d attempts, available %d; want 2 units bought on the 2nd", err, calls, f.available(t, "p"))
	}

	f.add(t, u, "p", 1)
	calls = 0
	f.svc.beforePlace = func() { calls++; f.add(t, u, "p", 1) }
	_, err := f.svc.Checkout(ctx, u, "", nil)
	if !errors.Is(err, ErrCartBusy) || calls != checkoutAttempts {
		t.Fatalf("err = %v after %d attempts, want ErrCartBusy after %d", err, calls, checkoutAttempts)
	}
	wantCode(t, err, apperr.CodeConflict)
	if f.available(t, "p") != 98 || f.hash(t, u)["p"] != "4" {
		t.Fatalf("a busy cart bought something: available %d, cart %v", f.available(t, "p"), f.hash(t, u))
	}
}
