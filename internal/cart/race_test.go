package cart

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/racetest"
)

// outcomes tallies concurrent attempts released together.
type outcomes struct {
	accepted, soldOut atomic.Int64
	mu                sync.Mutex
	other             []error
}

func (o *outcomes) record(err error) {
	switch {
	case err == nil:
		o.accepted.Add(1)
	case errors.Is(err, order.ErrOutOfStock):
		o.soldOut.Add(1)
	default:
		o.mu.Lock()
		o.other = append(o.other, err)
		o.mu.Unlock()
	}
}

// race runs every attempt in its own goroutine, all released at once.
func race(attempts []func() error) *outcomes {
	var o outcomes
	racetest.Together(racetest.Times(len(attempts), func(i int) { o.record(attempts[i]()) })...)
	return &o
}

// 24 carts share a SKU with 10 units: exactly 10 checkouts win, the other
// carts are refused whole and stay intact, and PostgreSQL ends up with
// exactly the accepted orders and sold counts.
func TestConcurrentCheckoutsNeverOversell(t *testing.T) {
	t.Parallel()
	const shoppers, scarce = 24, 10
	f := newFixture(t)
	ctx := context.Background()
	scarceRound := f.sale(t, "scarce", 500, scarce, 0)
	commonRound := f.sale(t, "common", 100, 1000, 0)
	users := make([]string, shoppers)
	attempts := make([]func() error, shoppers)
	for i := range users {
		users[i] = f.user(t)
		f.add(t, users[i], "scarce", 1)
		f.add(t, users[i], "common", 2)
		attempts[i] = func() error { _, err := f.svc.Checkout(ctx, users[i], "", nil); return err }
	}
	o := race(attempts)
	if o.other != nil || o.accepted.Load() != scarce || o.soldOut.Load() != shoppers-scarce {
		t.Fatalf("accepted %d, sold out %d, other %v; want %d and %d", o.accepted.Load(), o.soldOut.Load(), o.other, scarce, shoppers-scarce)
	}
	if f.available(t, "scarce") != 0 || f.available(t, "common") != 1000-2*scarce {
		t.Fatalf("available: scarce %d, common %d", f.available(t, "scarce"), f.available(t, "common"))
	}
	intact := 0
	for _, u := range users {
		if h := f.hash(t, u); len(h) == 2 && h["scarce"] == "1" && h["common"] == "2" {
			intact++
		} else if len(h) != 0 {
			t.Fatalf("cart %v is neither intact nor checked out", h)
		}
	}
	if intact != shoppers-scarce {
		t.Fatalf("%d carts intact, want %d", intact, shoppers-scarce)
	}
	f.drain(t)
	orders := f.count(t, `SELECT count(*) FROM orders`)
	items := f.count(t, `SELECT count(*) FROM order_items`)
	soldScarce := f.count(t, `SELECT sold FROM sale_rounds WHERE id = $1`, scarceRound)
	soldCommon := f.count(t, `SELECT sold FROM sale_rounds WHERE id = $1`, commonRound)
	if orders != scarce || items != 2*scarce || soldScarce != scarce || soldCommon != 2*scarce {
		t.Fatalf("PostgreSQL: %d orders, %d items, sold %d scarce and %d common", orders, items, soldScarce, soldCommon)
	}
}

// Checkouts and buy-now purchases race for the same 10 units: together
// they sell exactly 10, whichever path wins each.
func TestCheckoutRacesBuyNow(t *testing.T) {
	t.Parallel()
	const carts, buyers, units = 10, 10, 10
	f := newFixture(t)
	ctx := context.Background()
	round := f.sale(t, "hot", 999, units, 0)
	f.sale(t, "side", 50, 1000, 0)
	var attempts []func() error
	var checkoutsWon atomic.Int64
	for range carts {
		u := f.user(t)
		f.add(t, u, "side", 1)
		f.add(t, u, "hot", 1)
		attempts = append(attempts, func() error {
			_, err := f.svc.Checkout(ctx, u, "", nil)
			if err == nil {
				checkoutsWon.Add(1)
			}
			return err
		})
	}
	for range buyers {
		u := f.user(t)
		attempts = append(attempts, func() error {
			_, err := f.orders.Place(ctx, u, []order.Line{{SKU: "hot", Quantity: 1}}, order.PlaceOptions{})
			return err
		})
	}
	o := race(attempts)
	if o.other != nil || o.accepted.Load() != units || o.soldOut.Load() != carts+buyers-units {
		t.Fatalf("accepted %d, sold out %d, other %v", o.accepted.Load(), o.soldOut.Load(), o.other)
	}
	won := checkoutsWon.Load()
	if f.available(t, "hot") != 0 || f.available(t, "side") != 1000-won {
		t.Fatalf("available: hot %d, side %d with %d checkouts won", f.available(t, "hot"), f.available(t, "side"), won)
	}
	f.drain(t)
	if n, sold := f.count(t, `SELECT count(*) FROM orders`), f.count(t, `SELECT sold FROM sale_rounds WHERE id = $1`, round); n != units || sold != units {
		t.Fatalf("PostgreSQL: %d orders, hot sold %d; want %d each", n, sold, units)
	}
	t.Logf("%d of %d units went to checkouts", won, units)
}
