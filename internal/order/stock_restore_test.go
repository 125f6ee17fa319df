package order_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
)

// Restore checks what it is given before it writes anything, and writes
// only when the fence still holds.
func TestRestoreValidatesAndFences(t *testing.T) {
	t.Parallel()
	s := newLiveStock(t)
	ctx := context.Background()
	s.open(t, "r", 1, 10, 0)
	if _, err := s.buy("u1", order.Line{SKU: "r", Quantity: 3}); err != nil {
		t.Fatal(err)
	}
	fence, err := s.ReadFence(ctx, "r")
	if err != nil || fence != "1 7 " {
		t.Fatalf("fence %q %v", fence, err)
	}
	good := inventory.Restored{LiveRound: inventory.LiveRound{Round: 1, Quantity: 10, Available: 6, PriceCents: 100},
		Buyers: map[string]int64{"u1": 3, "u2": 1}}
	bad := []struct {
		name string
		edit func(r *inventory.Restored)
		want string
	}{
		{"counts do not add up", func(r *inventory.Restored) { r.Available = 7 }, "units held"},
		{"available over quantity", func(r *inventory.Restored) { r.Available, r.Buyers = 11, nil }, "exceeds quantity"},
		{"a buyer holding nothing", func(r *inventory.Restored) { r.Buyers = map[string]int64{"u1": 4, "u2": 0} }, "bad units"},
		{"no round", func(r *inventory.Restored) { r.Round = 0 }, "round must be positive"},
		{"negative released", func(r *inventory.Restored) { r.Released = -1 }, "non-negative"},
	}
	for _, tc := range bad {
		r := good
		r.Buyers = map[string]int64{"u1": 3, "u2": 1}
		tc.edit(&r)
		if _, err := s.Restore(ctx, "r", fence, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if f, _ := s.ReadFence(ctx, "r"); f != fence {
		t.Fatalf("a refused restore wrote: fence %q", f)
	}
	// A purchase after the fence was read: the rebuilt state is stale.
	if _, err := s.buy("u3", order.Line{SKU: "r", Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, "r", fence, good); !errors.Is(err, inventory.ErrMoved) {
		t.Fatalf("restore past a moved fence: %v, want ErrMoved", err)
	}
	fence, _ = s.ReadFence(ctx, "r")
	good.Buyers["u3"], good.Available = 1, 5
	if changed, err := s.Restore(ctx, "r", fence, good); err != nil || !changed {
		t.Fatalf("restore: %v %v", changed, err)
	}
	fence, _ = s.ReadFence(ctx, "r")
	if changed, err := s.Restore(ctx, "r", fence, good); err != nil || changed {
		t.Fatalf("the same restore again: changed %v %v, want unchanged", changed, err)
	}
	live, _, _ := s.Live(ctx, "r")
	if live.Available != 5 || s.r.Client.HGet(ctx, s.BuyersKey("r"), "u2").Val() != "1" {
		t.Fatalf("after the restore: %+v", live)
	}
}
