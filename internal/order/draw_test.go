package order

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
)

// A draw's units are never bought first come, first served: a purchase of
// its SKU, and a checkout holding it beside a SKU on sale, are refused
// sale_not_active, and nothing is reserved (docs/api.md, Draws).
func TestDrawRoundIsNotSold(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	drawRound := f.rounds.Open(t, f.db.Pool, f.stock, f.r, "draw-1", 100,
		inventory.Seed{Quantity: 10, PerUserLimit: 1, Draw: &inventory.DrawSettings{ClosesAt: time.Now().Add(time.Hour)}})
	f.sale(t, "plain-1", 10, 0, 100)
	u := f.user(t)
	if _, err := f.svc.Place(ctx, u, []Line{{SKU: "draw-1", Quantity: 1}}, PlaceOptions{}); !errors.Is(err, ErrSaleNotActive) {
		t.Fatalf("buy a draw's unit: %v, want sale_not_active", err)
	}
	lines := []Line{{SKU: "plain-1", Quantity: 1}, {SKU: "draw-1", Quantity: 1}}
	if _, err := f.svc.Place(ctx, u, lines, PlaceOptions{}); !errors.Is(err, ErrSaleNotActive) {
		t.Fatalf("check out a draw's unit: %v, want sale_not_active", err)
	}
	for sku, want := range map[string]int64{"draw-1": 10, "plain-1": 10} {
		live, _, err := f.stock.Live(ctx, sku)
		if err != nil || live.Available != want {
			t.Fatalf("%s available %d (%v), want %d", sku, live.Available, err, want)
		}
	}
	if live, _, _ := f.stock.Live(ctx, "draw-1"); !live.Draw || live.Round != drawRound {
		t.Fatalf("live draw round %+v, want round %d marked a draw", live, drawRound)
	}
}
