package saga

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// lastUnitHeld is a SKU of partition 5 whose one unit another buyer's
// saga holds (its process gone, say, between hold and commit): the hold
// of order id, as attempt-1, with items.
type lastUnitHeld struct {
	sku   string
	id    string
	user  string
	items []order.ReservedItem
}

// holdLastUnit makes a lastUnitHeld of a SKU named after prefix; stale
// puts the hold past its deadline.
func (f *clusterFixture) holdLastUnit(t *testing.T, prefix string, stale bool) lastUnitHeld {
	t.Helper()
	sku := f.skuIn(t, prefix, 5, 1)
	lines := []order.Line{{SKU: f.skuIn(t, prefix+"-home", 1, 10), Quantity: 1}, {SKU: sku, Quantity: 1}}
	id := f.orderID(t, lines)
	u := f.user(t)
	items := f.take(t, 5, id, u, "attempt-1", lines[1:])
	if stale {
		f.rdb.ZAdd(context.Background(), f.saga.keys.Holds(5), redis.Z{Score: 1, Member: id})
	}
	return lastUnitHeld{sku: sku, id: id, user: u, items: items}
}

// A buy-now of the last unit while another buyer's saga holds it (its
// process killed before the commit, the hold past its deadline or not
// yet) is not refused out_of_stock: that saga may never commit, and the
// repair gives the unit back, after which a repeat of the same
// Idempotency-Key would buy it, a second answer to one request (e2e
// TestClusterDrillServeKilledMidCheckout saw 409 out_of_stock, then 202).
// The buyer is told to retry (503) until the hold is settled; a
// refusal the held units could not undo stays a refusal.
func TestStockRefusalWaitsForUnitsHeldInFlight(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	for _, stale := range []bool{true, false} {
		h := f.holdLastUnit(t, fmt.Sprintf("held-%v", stale), stale)
		u := f.user(t)
		buy := []order.Line{{SKU: h.sku, Quantity: 1}}
		_, err := f.svc.Place(ctx, u, []order.Line{{SKU: h.sku, Quantity: 2}}, order.PlaceOptions{IdemKey: "two"})
		wantSKUs(t, err, apperr.CodeOutOfStock, h.sku) // 1 held + 0 available < 2: true whatever the hold becomes
		_, err = f.svc.Place(ctx, u, buy, order.PlaceOptions{IdemKey: "k"})
		wantCode(t, err, apperr.CodeUnavailable) // not out_of_stock while the unit is held
		if stale {
			if _, err := f.clusterSweeper().Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		} else if _, err := f.saga.unhold(ctx, 5, h.id, h.user, "attempt-1", "release", h.items); err != nil {
			t.Fatal(err) // that saga refused elsewhere gives its hold back
		}
		first, err := f.svc.Place(ctx, u, buy, order.PlaceOptions{IdemKey: "k"})
		if err != nil || first.Replayed {
			t.Fatalf("stale %v: the repeat once the hold is given back: %+v %v", stale, first, err)
		}
		again, err := f.svc.Place(ctx, u, buy, order.PlaceOptions{IdemKey: "k"})
		if err != nil || !again.Replayed || again.OrderID != first.OrderID {
			t.Fatalf("stale %v: another repeat: %+v %v, want %s replayed", stale, again, err, first.OrderID)
		}
		_, err = f.svc.Place(ctx, f.user(t), buy, order.PlaceOptions{IdemKey: "k"})
		wantSKUs(t, err, apperr.CodeOutOfStock, h.sku) // sold: nothing held
		f.wantAvailable(t, "", map[string]int64{h.sku: 0})
	}
	f.noHolds(t)
}

// A buy-now refused while another buyer's saga holds the last unit, live,
// waits for that hold: the saga refused elsewhere gives it back (here at
// the second run's first step, told by the fault hook) and the run after
// the wait buys the unit, the one answer.
func TestStockRefusalRunsAgainOnceTheHoldIsGivenBack(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	h := f.holdLastUnit(t, "back", false)
	svc, p := f.service(Options{}, order.Options{})
	runs := 0
	p.InjectFault(func(at Point) {
		if at != AfterHold {
			return
		}
		if runs++; runs == 2 {
			if _, err := p.unhold(ctx, 5, h.id, h.user, "attempt-1", "release", h.items); err != nil {
				t.Error(err)
			}
		}
	})
	placed, err := svc.Place(ctx, f.user(t), []order.Line{{SKU: h.sku, Quantity: 1}}, order.PlaceOptions{IdemKey: "k"})
	if err != nil || runs != 2 {
		t.Fatalf("placed %+v %v after %d runs, want the unit bought by the second", placed, err, runs)
	}
	f.wantAvailable(t, "", map[string]int64{h.sku: 0})
	f.noHolds(t)
}

// Buyers racing for a SKU whose last units a dead saga holds: those who
// find nothing available are told to retry (none refused while the units
// are held), and once the repair has given them back, their repeats race
// for exactly those units; the rest are refused, and a further repeat of
// each key answers the same.
func TestRaceForUnitsADeadSagaHolds(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	const units, heldUnits, buyers = 5, 2, 12
	sku := f.skuIn(t, "dead", 5, units)
	dead := []order.Line{{SKU: f.skuIn(t, "dead-home", 1, 10), Quantity: 1}, {SKU: sku, Quantity: heldUnits}}
	id := f.orderID(t, dead)
	f.take(t, 5, id, f.user(t), "attempt-1", dead[1:])
	f.rdb.ZAdd(ctx, f.saga.keys.Holds(5), redis.Z{Score: 1, Member: id}) // past its deadline
	users := make([]string, buyers)
	for i := range users {
		users[i] = f.user(t)
	}
	race := func(who []string) (placed map[string]string, codes map[string]int) {
		var mu sync.Mutex
		placed, codes = map[string]string{}, map[string]int{}
		var ops []func()
		for _, u := range who {
			ops = append(ops, func() {
				p, err := f.svc.Place(ctx, u, []order.Line{{SKU: sku, Quantity: 1}}, order.PlaceOptions{IdemKey: "k"})
				var e *apperr.Error
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					placed[u] = p.OrderID
				case errors.As(err, &e):
					codes[e.Code]++
				default:
					t.Error(err)
				}
			})
		}
		ordertesting.Together(ops...)
		return placed, codes
	}
	first, codes := race(users)
	if len(first) != units-heldUnits || codes[apperr.CodeUnavailable] != buyers-len(first) {
		t.Fatalf("while held: %d placed, answers %v; want %d placed, the rest told to retry", len(first), codes, units-heldUnits)
	}
	if _, err := f.clusterSweeper().Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	var waiting []string
	for _, u := range users {
		if first[u] == "" {
			waiting = append(waiting, u)
		}
	}
	second, codes := race(waiting)
	if len(second) != heldUnits || codes[apperr.CodeOutOfStock] != len(waiting)-heldUnits {
		t.Fatalf("once given back: %d placed, answers %v; want %d placed, the rest out of stock", len(second), codes, heldUnits)
	}
	maps.Copy(second, first)
	again, codes := race(users)
	if !maps.Equal(again, second) || codes[apperr.CodeOutOfStock] != buyers-units {
		t.Fatalf("repeats: placed %v, answers %v; want %v and the refusals again", again, codes, second)
	}
	if ev := f.events(t); len(ev) != units {
		t.Fatalf("%d orders, want %d", len(ev), units)
	}
	f.wantAvailable(t, "", map[string]int64{sku: 0})
	f.noHolds(t)
}
