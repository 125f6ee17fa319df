package cart

import (
	"context"
	"fmt"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"reflect"
	"testing"
	"time"
)

// Add increments, Set replaces, 0 and Remove drop; totals follow the
// catalog's prices; items come sorted by sku.
func TestCartArithmetic(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.product(t, "b-mug", 1250)
	f.product(t, "a-tea", 399)
	u := f.user(t)

	if c, err := f.svc.Get(ctx, u); err != nil || len(c.Items) != 0 || c.Items == nil || c.TotalCents != 0 {
		t.Fatalf("empty cart = %+v %v, want no items (an empty array), total 0", c, err)
	}
	f.add(t, u, "b-mug", 2)
	c := f.add(t, u, "b-mug", 3)
	if len(c.Items) != 1 || c.Items[0].Quantity != 5 || c.TotalCents != 5*1250 {
		t.Fatalf("after 2+3 mugs: %+v", c)
	}
	c = f.add(t, u, "a-tea", 4)
	want := Cart{Items: []Item{
		{SKU: "a-tea", Name: "Product a-tea", PriceCents: 399, Quantity: 4, LineTotalCents: 1596},
		{SKU: "b-mug", Name: "Product b-mug", PriceCents: 1250, Quantity: 5, LineTotalCents: 6250},
	}, TotalCents: 7846}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("cart = %+v\nwant %+v", c, want)
	}
	if c, _ = f.svc.Set(ctx, u, "b-mug", 1); c.TotalCents != 1596+1250 {
		t.Fatalf("after set mugs to 1: %+v", c)
	}
	if c, _ = f.svc.Set(ctx, u, "a-tea", 0); len(c.Items) != 1 || c.Items[0].SKU != "b-mug" {
		t.Fatalf("after set tea to 0: %+v", c)
	}
	if c, _ = f.svc.Remove(ctx, u, "b-mug"); len(c.Items) != 0 || c.TotalCents != 0 {
		t.Fatalf("after remove: %+v", c)
	}
	if n := f.r.Client.Exists(ctx, f.svc.key(u)).Val(); n != 0 {
		t.Fatalf("an emptied cart left its key behind")
	}
	for op, want := range map[string]float64{"get": 1, "add": 3, "set": 2, "remove": 1} {
		if got := f.metric(t, "shop_cart_operations_total", "op", op); got != want {
			t.Errorf("cart operations{op=%s} = %v, want %v", op, got, want)
		}
	}
}

// A price change in the catalog shows in the cart: the cart stores
// quantities only.
func TestCartShowsCurrentPrices(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.product(t, "p", 100)
	u := f.user(t)
	f.add(t, u, "p", 3)
	if _, err := f.catalog.Update(context.Background(), "p", inventory.ProductInput{Name: "Renamed", Category: "c", PriceCents: 250}); err != nil {
		t.Fatal(err)
	}
	c, err := f.svc.Get(context.Background(), u)
	if err != nil || c.Items[0].Name != "Renamed" || c.Items[0].LineTotalCents != 750 || c.TotalCents != 750 {
		t.Fatalf("cart after a price change = %+v %v", c, err)
	}
}

// Every change resets the 24 h TTL; a read does not.
func TestTTLRefreshedOnChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.product(t, "p", 100)
	f.product(t, "q", 100)
	u := f.user(t)
	key := f.svc.key(u)
	f.add(t, u, "p", 1)
	changes := []struct {
		name   string
		change func() error
	}{
		{"add", func() error { _, err := f.svc.Add(ctx, u, "p", 1); return err }},
		{"set", func() error { _, err := f.svc.Set(ctx, u, "p", 5); return err }},
		{"set_new_line", func() error { _, err := f.svc.Set(ctx, u, "q", 1); return err }},
		{"remove", func() error { _, err := f.svc.Remove(ctx, u, "q"); return err }},
	}
	for _, tc := range changes {
		f.r.Client.PExpire(ctx, key, time.Minute)
		if _, err := f.svc.Get(ctx, u); err != nil {
			t.Fatal(err)
		}
		if ttl := f.r.Client.PTTL(ctx, key).Val(); ttl > time.Minute {
			t.Fatalf("%s: a read refreshed the TTL to %s", tc.name, ttl)
		}
		if err := tc.change(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ttl := f.r.Client.PTTL(ctx, key).Val(); ttl < TTL-time.Minute || ttl > TTL {
			t.Fatalf("%s: TTL = %s, want about %s", tc.name, ttl, TTL)
		}
	}
	// Removing a line that is not there changes nothing, TTL included.
	f.r.Client.PExpire(ctx, key, time.Minute)
	if _, err := f.svc.Remove(ctx, u, "q"); err != nil {
		t.Fatal(err)
	}
	if ttl := f.r.Client.PTTL(ctx, key).Val(); ttl > time.Minute {
		t.Fatalf("a no-op remove refreshed the TTL to %s", ttl)
	}
}

// The line and quantity caps hold, and a refused change changes nothing.
func TestCartCaps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	u := f.user(t)
	for i := range MaxLines + 1 {
		f.product(t, fmt.Sprintf("p%03d", i), 1)
	}
	for i := range MaxLines {
		f.add(t, u, fmt.Sprintf("p%03d", i), 1)
	}
	extra := fmt.Sprintf("p%03d", MaxLines)
	_, err := f.svc.Add(ctx, u, extra, 1)
	wantField(t, err, "sku")
	_, err = f.svc.Set(ctx, u, extra, 1)
	wantField(t, err, "sku")
	if c := f.add(t, u, "p000", MaxQuantity-1); c.Items[0].Quantity != MaxQuantity {
		t.Fatalf("a full cart refused more of a line it holds: %+v", c.Items[0])
	}
	_, err = f.svc.Add(ctx, u, "p000", 1)
	wantField(t, err, "quantity")
	h := f.hash(t, u)
	if len(h) != MaxLines || h["p000"] != fmt.Sprint(MaxQuantity) || h[extra] != "" {
		t.Fatalf("refusals changed the cart: %d lines, p000=%s", len(h), h["p000"])
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.product(t, "p", 100)
	u := f.user(t)
	f.add(t, u, "p", 2)
	tests := []struct {
		name string
		call func() error
		code string
	}{
		{"add_zero", func() error { _, err := f.svc.Add(ctx, u, "p", 0); return err }, apperr.CodeInvalidRequest},
		{"add_negative", func() error { _, err := f.svc.Add(ctx, u, "p", -1); return err }, apperr.CodeInvalidRequest},
		{"add_over_max", func() error { _, err := f.svc.Add(ctx, u, "p", MaxQuantity+1); return err }, apperr.CodeInvalidRequest},
		{"add_unknown", func() error { _, err := f.svc.Add(ctx, u, "nope", 1); return err }, apperr.CodeNotFound},
		{"add_malformed", func() error { _, err := f.svc.Add(ctx, u, "no pe!", 1); return err }, apperr.CodeNotFound},
		{"set_negative", func() error { _, err := f.svc.Set(ctx, u, "p", -1); return err }, apperr.CodeInvalidRequest},
		{"set_over_max", func() error { _, err := f.svc.Set(ctx, u, "p", MaxQuantity+1); return err }, apperr.CodeInvalidRequest},
		{"set_unknown", func() error { _, err := f.svc.Set(ctx, u, "nope", 1); return err }, apperr.CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), tc.code) })
	}
	if h := f.hash(t, u); len(h) != 1 || h["p"] != "2" {
		t.Fatalf("cart after bad input = %v, want p=2 only", h)
	}
}

// A product deleted from the catalog drops out of the view and is
// reported; the line stays until the shopper removes it, and checkout
// refuses it as a sale that is not active.
func TestDeletedProduct(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.sale(t, "keep", 500, 10, 0)
	f.sale(t, "gone", 700, 10, 0)
	u := f.user(t)
	f.add(t, u, "keep", 1)
	f.add(t, u, "gone", 2)
	if err := f.catalog.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	c, err := f.svc.Get(ctx, u)
	if err != nil || len(c.Items) != 1 || c.Items[0].SKU != "keep" || c.TotalCents != 500 ||
		!reflect.DeepEqual(c.UnavailableSKUs, []string{"gone"}) {
		t.Fatalf("cart = %+v %v, want keep only and gone reported", c, err)
	}
	_, err = f.svc.Checkout(ctx, u, "", nil)
	e := wantCode(t, err, apperr.CodeSaleNotActive)
	if !reflect.DeepEqual(e.Extra["skus"], []string{"gone"}) || f.available(t, "keep") != 10 || len(f.hash(t, u)) != 2 {
		t.Fatalf("checkout with a deleted product: %v; cart %v", e.Extra, f.hash(t, u))
	}
	if _, err := f.svc.Set(ctx, u, "gone", 0); err != nil {
		t.Fatalf("removing a deleted product's line: %v", err)
	}
	if _, err := f.svc.Checkout(ctx, u, "", nil); err != nil {
		t.Fatalf("checkout after removing it: %v", err)
	}
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	e := wantCode(t, err, apperr.CodeInvalidRequest)
	if len(e.Fields) != 1 || e.Fields[0].Field != field {
		t.Fatalf("fields = %+v, want %s", e.Fields, field)
	}
}
