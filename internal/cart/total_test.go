package cart

import (
	"context"
	"fmt"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
)

// The largest checkout the caps allow (MaxLines lines of MaxQuantity units
// near MaxPriceCents) is exact end to end: the reserve script's total
// (Lua numbers are doubles, exact only up to 2^53) and the writer's check
// that it is the sum of the lines agree, so the order is persisted, not
// dead-lettered. Prices and quantities are odd on purpose: round numbers
// stay exact in doubles far beyond 2^53 and would hide a bound too high.
func TestLargestCheckoutTotalIsExact(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	u := f.user(t)
	var want int64
	for i := range MaxLines {
		sku := fmt.Sprintf("big-%03d", i)
		price, qty := int64(inventory.MaxPriceCents-i), MaxQuantity-i
		f.sale(t, sku, price, MaxQuantity, 0)
		f.add(t, u, sku, qty)
		want += price * int64(qty)
	}
	if c, err := f.svc.Get(ctx, u); err != nil || c.TotalCents != want {
		t.Fatalf("cart total = %d (%v), want %d", c.TotalCents, err, want)
	}
	placed, err := f.svc.Checkout(ctx, u, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.drain(t)
	if n := f.count(t, `SELECT count(*) FROM orders WHERE id = $1 AND total_cents = $2`, placed.OrderID, want); n != 1 {
		t.Fatalf("order %s not persisted with total %d", placed.OrderID, want)
	}
	if sum := f.count(t, `SELECT sum(quantity * price_cents)::bigint FROM order_items WHERE order_id = $1`, placed.OrderID); sum != want {
		t.Fatalf("items sum to %d, want %d", sum, want)
	}
	if dead := f.r.Client.XLen(ctx, f.r.Prefix+"orders:dead").Val(); dead != 0 {
		t.Fatalf("%d entries dead-lettered", dead)
	}
}
