package order_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/testenv"
)

// liveStock is the live stock on real Redis, with the order service's
// placement (the real reserve script) to buy with: Release is its inverse.
type liveStock struct {
	*inventory.Stock
	orders *order.Service
	r      *testenv.Redis
}

func newLiveStock(t *testing.T) *liveStock {
	t.Helper()
	r := testenv.NewRedis(t)
	stock := inventory.NewStock(r.Client, r.Prefix)
	orders := order.New(nil, r.Client, stock, nil, r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), order.Options{})
	return &liveStock{Stock: stock, orders: orders, r: r}
}

func (s *liveStock) open(t *testing.T, sku string, round int64, quantity int64, limit int) {
	t.Helper()
	err := s.OpenRound(context.Background(), sku, inventory.LiveRound{Round: round, Quantity: quantity, PerUserLimit: limit, PriceCents: 100})
	if err != nil {
		t.Fatal(err)
	}
}

// newBought is a liveStock with round 1 of "s" open (quantity units, limit
// per buyer) and u1's order of units of it, which it returns.
func newBought(t *testing.T, quantity int64, limit, units int) (*liveStock, inventory.Release) {
	t.Helper()
	s := newLiveStock(t)
	s.open(t, "s", 1, quantity, limit)
	return s, s.mustBuy(t, "u1", order.Line{SKU: "s", Quantity: units})
}

// buy places an order and returns what releasing it would hand back.
func (s *liveStock) buy(user string, lines ...order.Line) (inventory.Release, error) {
	ctx := context.Background()
	p, err := s.orders.Place(ctx, user, lines, order.PlaceOptions{})
	if err != nil {
		return inventory.Release{}, err
	}
	rel := inventory.Release{OrderID: p.OrderID, UserID: user}
	for _, l := range lines {
		live, _, err := s.Live(ctx, l.SKU)
		if err != nil {
			return inventory.Release{}, err
		}
		rel.Lines = append(rel.Lines, inventory.ReleaseLine{SKU: l.SKU, Quantity: l.Quantity, RoundID: live.Round})
	}
	return rel, nil
}

func (s *liveStock) mustBuy(t *testing.T, user string, lines ...order.Line) inventory.Release {
	t.Helper()
	rel, err := s.buy(user, lines...)
	if err != nil {
		t.Fatalf("buy %v: %v", lines, err)
	}
	return rel
}

// wantState fails t unless sku's stock is available, released, and
// bought by user; when says at what point.
func (s *liveStock) wantState(t *testing.T, when, sku, user string, available, released, bought int64) {
	t.Helper()
	if a, r, b := s.state(t, sku, user); a != available || r != released || b != bought {
		t.Fatalf("%s: available %d released %d bought %d, want %d %d %d", when, a, r, b, available, released, bought)
	}
}

func (s *liveStock) state(t *testing.T, sku, user string) (available, released, bought int64) {
	t.Helper()
	live, _, err := s.Live(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	bought, _ = s.r.Client.HGet(context.Background(), s.BuyersKey(sku), user).Int64()
	return live.Available, live.Released, bought
}

func TestReleaseGivesTheUnitsBackOnce(t *testing.T) {
	t.Parallel()
	s := newLiveStock(t)
	ctx := context.Background()
	s.open(t, "a", 1, 5, 2)
	s.open(t, "b", 1, 5, 0)
	rel := s.mustBuy(t, "u1", order.Line{SKU: "a", Quantity: 2}, order.Line{SKU: "b", Quantity: 3})
	if _, err := s.buy("u1", order.Line{SKU: "a", Quantity: 1}); !errors.Is(err, order.ErrLimitExceeded) {
		t.Fatalf("third unit: %v, want limit_exceeded", err)
	}

	got, err := s.Release(ctx, rel)
	if err != nil || got != (inventory.Released{Units: 5}) {
		t.Fatalf("release = %+v %v, want 5 units back", got, err)
	}
	s.wantState(t, "a", "a", "u1", 5, 2, 0)
	if a, r, _ := s.state(t, "b", "u1"); a != 5 || r != 3 {
		t.Fatalf("b: available %d released %d, want 5 3", a, r)
	}
	// The buyer's count went down with it: the limit is free again.
	s.mustBuy(t, "u1", order.Line{SKU: "a", Quantity: 2})

	again, err := s.Release(ctx, rel)
	if err != nil || again != (inventory.Released{Before: 2}) {
		t.Fatalf("second release = %+v %v, want nothing back", again, err)
	}
	s.wantState(t, "after the repeat", "a", "u1", 3, 2, 2)
}

// A release after a re-seed gives nothing to the new round: its stock and
// counts are not the old round's.
func TestReleaseAfterReseedGivesNothingBack(t *testing.T) {
	t.Parallel()
	s, rel := newBought(t, 5, 1, 1)
	s.open(t, "s", 2, 10, 1)
	s.mustBuy(t, "u1", order.Line{SKU: "s", Quantity: 1})

	got, err := s.Release(context.Background(), rel)
	if err != nil || got != (inventory.Released{Stale: 1}) {
		t.Fatalf("release = %+v %v, want one stale line", got, err)
	}
	s.wantState(t, "new round", "s", "u1", 9, 0, 1)
}

func TestReleaseGuardMovesTheCallersStateOnce(t *testing.T) {
	t.Parallel()
	s := newLiveStock(t)
	ctx := context.Background()
	s.open(t, "s", 1, 5, 0)
	state := s.r.Prefix + "state:o1"
	guard := &inventory.Guard{Key: state, Field: "status", From: []string{"pending", "confirmed"}, To: "cancelled"}

	paid := s.mustBuy(t, "u1", order.Line{SKU: "s", Quantity: 2})
	s.r.Client.HSet(ctx, state, "status", "paid")
	paid.Guard = guard
	if got, err := s.Release(ctx, paid); err != nil || got != (inventory.Released{Refused: true, State: "paid"}) {
		t.Fatalf("release of a paid order = %+v %v, want refused", got, err)
	}
	if a, _, b := s.state(t, "s", "u1"); a != 3 || b != 2 {
		t.Fatalf("a refused release changed the stock: available %d bought %d", a, b)
	}

	s.r.Client.HSet(ctx, state, "status", "confirmed")
	if got, err := s.Release(ctx, paid); err != nil || got != (inventory.Released{Units: 2}) {
		t.Fatalf("guarded release = %+v %v", got, err)
	}
	if st := s.r.Client.HGet(ctx, state, "status").Val(); st != "cancelled" {
		t.Fatalf("guard field = %q, want cancelled", st)
	}
	if got, err := s.Release(ctx, paid); err != nil || got != (inventory.Released{Refused: true, State: "cancelled"}) {
		t.Fatalf("second guarded release = %+v %v, want refused", got, err)
	}
	if a, _, _ := s.state(t, "s", "u1"); a != 5 {
		t.Fatalf("available %d, want 5", a)
	}
}

func TestReleaseRejectsBadInputBeforeWriting(t *testing.T) {
	t.Parallel()
	s, good := newBought(t, 5, 0, 2)
	line := good.Lines[0]
	bad := map[string]inventory.Release{
		"no_order_id":     {UserID: "u1", Lines: good.Lines},
		"no_user":         {OrderID: good.OrderID, Lines: good.Lines},
		"no_lines":        {OrderID: good.OrderID, UserID: "u1"},
		"zero_quantity":   {OrderID: good.OrderID, UserID: "u1", Lines: []inventory.ReleaseLine{{SKU: "s", Quantity: 0, RoundID: 1}}},
		"no_round":        {OrderID: good.OrderID, UserID: "u1", Lines: []inventory.ReleaseLine{{SKU: "s", Quantity: 2}}},
		"bad_sku":         {OrderID: good.OrderID, UserID: "u1", Lines: []inventory.ReleaseLine{line, {SKU: "", Quantity: 1, RoundID: 1}}},
		"duplicate_sku":   {OrderID: good.OrderID, UserID: "u1", Lines: []inventory.ReleaseLine{line, line}},
		"guard_no_values": {OrderID: good.OrderID, UserID: "u1", Lines: good.Lines, Guard: &inventory.Guard{Key: "k", Field: "status"}},
		"guard_comma":     {OrderID: good.OrderID, UserID: "u1", Lines: good.Lines, Guard: &inventory.Guard{Key: "k", Field: "f", From: []string{"a,b"}, To: "c"}},
	}
	for name, rel := range bad {
		if got, err := s.Release(context.Background(), rel); err == nil {
			t.Errorf("%s: accepted (%+v)", name, got)
		}
	}
	s.wantState(t, "bad input changed the stock", "s", "u1", 3, 0, 2)
}

// The same release run by many callers at once (two sweepers, a retry
// racing its original) gives the units back exactly once.
func TestReleaseRaceSameOrderOnce(t *testing.T) {
	t.Parallel()
	s, rel := newBought(t, 10, 0, 4)
	var units atomic.Int64
	release := func() {
		got, err := s.Release(context.Background(), rel)
		if err != nil {
			t.Error(err)
		}
		units.Add(got.Units)
	}
	ordertesting.Together(slices.Repeat([]func(){release}, 20)...)
	if a, r, b := s.state(t, "s", "u1"); units.Load() != 4 || a != 10 || r != 4 || b != 0 {
		t.Fatalf("given back %d, available %d, released %d, bought %d; want 4 10 4 0", units.Load(), a, r, b)
	}
}

// The last unit, released while many buyers race for it: it is sold at
// most once more, and what is left plus what was sold is exactly what the
// release gave back.
func TestReleaseRaceWithPurchaseOfTheLastUnit(t *testing.T) {
	t.Parallel()
	s := newLiveStock(t)
	for round := range 10 {
		sku := "last-" + strconv.Itoa(round)
		s.open(t, sku, 1, 1, 1)
		rel := s.mustBuy(t, "holder", order.Line{SKU: sku, Quantity: 1})
		var won atomic.Int64
		ops := []func(){func() {
			if got, err := s.Release(context.Background(), rel); err != nil || got.Units != 1 {
				t.Errorf("release = %+v %v", got, err)
			}
		}}
		for b := range 20 {
			ops = append(ops, func() {
				_, err := s.buy("buyer-"+strconv.Itoa(b), order.Line{SKU: sku, Quantity: 1})
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, order.ErrOutOfStock):
					t.Error(err)
				}
			})
		}
		ordertesting.Together(ops...)
		a, r, _ := s.state(t, sku, "holder")
		if won.Load()+a != 1 || won.Load() > 1 || r != 1 {
			t.Fatalf("%s: %d buyers won, available %d, released %d: the released unit must be sold at most once", sku, won.Load(), a, r)
		}
	}
}

// The outbox entry is added with the release, in the same step, and not
// when the guard refuses.
func TestReleaseOutboxEntryComesWithTheRelease(t *testing.T) {
	t.Parallel()
	s := newLiveStock(t)
	ctx := context.Background()
	s.open(t, "s", 1, 5, 0)
	state, outbox := s.r.Prefix+"state:o1", s.r.Prefix+"outbox"
	rel := s.mustBuy(t, "u1", order.Line{SKU: "s", Quantity: 2})
	rel.Guard = &inventory.Guard{Key: state, Field: "status", From: []string{"confirmed"}, To: "cancelled"}
	rel.Outbox = &inventory.Outbox{Stream: outbox, Values: []string{"order_id", rel.OrderID, "status", "cancelled"}}

	s.r.Client.HSet(ctx, state, "status", "paid")
	if got, err := s.Release(ctx, rel); err != nil || !got.Refused {
		t.Fatalf("refused release = %+v %v", got, err)
	}
	if n := s.r.Client.XLen(ctx, outbox).Val(); n != 0 {
		t.Fatalf("a refused release added %d outbox entries", n)
	}
	s.r.Client.HSet(ctx, state, "status", "confirmed")
	if got, err := s.Release(ctx, rel); err != nil || got.Units != 2 {
		t.Fatalf("release = %+v %v", got, err)
	}
	entries := s.r.Client.XRange(ctx, outbox, "-", "+").Val()
	if len(entries) != 1 || entries[0].Values["order_id"] != rel.OrderID || entries[0].Values["status"] != "cancelled" {
		t.Fatalf("outbox = %+v, want one entry for %s", entries, rel.OrderID)
	}
	rel.Outbox.Values = rel.Outbox.Values[:3]
	if _, err := s.Release(ctx, rel); err == nil {
		t.Fatal("an odd number of outbox values was accepted")
	}
}
