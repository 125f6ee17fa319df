package saga

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/shop-oss/shop/internal/order"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// The placers' contract (placer.go): every case runs against the one-script
// placer on a single Redis and the saga placer on a 3-master cluster, whose
// SKUs each fall on a partition of their own, so an order of two lines is
// a saga across shards.

// contract is one placer's fixture.
type contract struct {
	*fixture
	n atomic.Int64 // SKUs made so far
}

// sku opens a sale of units (limit per user) for a new SKU named after
// name, on the partition after the previous SKU's.
func (c *contract) sku(t *testing.T, name string, units, limit int) string {
	t.Helper()
	sku, _ := c.open(t, name, inventory.Seed{Quantity: units, PerUserLimit: limit})
	return sku
}

// open is sku of any seed; it returns the SKU and its round.
func (c *contract) open(t *testing.T, name string, seed inventory.Seed) (string, int64) {
	t.Helper()
	want := int(c.n.Add(1)) % max(c.parts.Count(), 1)
	for i := 0; ; i++ {
		sku := fmt.Sprintf("%s-%d", name, i)
		if !c.parts.Grouped() || c.parts.Of(sku) == want {
			return sku, c.saleWith(t, sku, 100, seed)
		}
	}
}

func (c *contract) available(t *testing.T, skus ...string) []int64 {
	t.Helper()
	a, err := c.stock.Available(context.Background(), skus...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (c *contract) buy(user string, lines ...order.Line) (order.Placed, error) {
	return c.svc.Place(context.Background(), user, lines, order.PlaceOptions{})
}

// forEachPlacer runs test against each placer, each case in parallel on
// the placer's fixture.
func forEachPlacer(t *testing.T, cases map[string]func(*testing.T, *contract)) {
	single := &contract{fixture: newFixture(t)}
	cluster := &contract{fixture: newClusterFixture(t).fixture}
	for name, c := range map[string]*contract{"one script": single, "saga": cluster} {
		t.Run(name, func(t *testing.T) {
			for cname, test := range cases {
				t.Run(cname, func(t *testing.T) { t.Parallel(); test(t, c) })
			}
		})
	}
	if single.saga != nil {
		t.Errorf("single Redis: placer %T, want order's one script", single.saga)
	}
	if cluster.saga == nil {
		t.Error("cluster: no saga placer")
	}
}

// wantSKUs is wantCode, and the answer names exactly skus.
func wantSKUs(t *testing.T, err error, code string, skus ...string) {
	t.Helper()
	wantCode(t, err, code)
	var e *apperr.Error
	if errors.As(err, &e) && fmt.Sprint(e.Extra["skus"]) != fmt.Sprint(skus) {
		t.Fatalf("%s names %v, want %v", code, e.Extra["skus"], skus)
	}
}

func TestPlacerContract(t *testing.T) {
	forEachPlacer(t, withRoomCases(map[string]func(*testing.T, *contract){
		"takes every line": func(t *testing.T, c *contract) {
			a, b := c.sku(t, "take-a", 10, 0), c.sku(t, "take-b", 10, 0)
			p, err := c.buy(c.user(t), order.Line{SKU: a, Quantity: 3}, order.Line{SKU: b, Quantity: 2})
			if err != nil || p.Status != order.StatusPending || p.Replayed || p.OrderID == "" {
				t.Fatalf("placed %+v, %v", p, err)
			}
			if got := c.available(t, a, b); got[0] != 7 || got[1] != 8 {
				t.Fatalf("available %v, want [7 8]", got)
			}
		},
		"all or nothing": func(t *testing.T, c *contract) {
			a, b := c.sku(t, "aon-a", 10, 0), c.sku(t, "aon-b", 1, 0)
			_, err := c.buy(c.user(t), order.Line{SKU: a, Quantity: 3}, order.Line{SKU: b, Quantity: 2})
			wantSKUs(t, err, apperr.CodeOutOfStock, b)
			if got := c.available(t, a, b); got[0] != 10 || got[1] != 1 {
				t.Fatalf("available %v after a refusal, want [10 1]", got)
			}
		},
		"per-user limit": func(t *testing.T, c *contract) {
			a := c.sku(t, "limit", 10, 2)
			u := c.user(t)
			if _, err := c.buy(u, order.Line{SKU: a, Quantity: 2}); err != nil {
				t.Fatal(err)
			}
			_, err := c.buy(u, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodeLimitExceeded, a)
			if _, err := c.buy(c.user(t), order.Line{SKU: a, Quantity: 2}); err != nil {
				t.Fatalf("another buyer: %v", err)
			}
			if got := c.available(t, a); got[0] != 6 {
				t.Fatalf("available %v, want [6]", got)
			}
		},
		"no sale": func(t *testing.T, c *contract) {
			_, err := c.buy(c.user(t), order.Line{SKU: "never-on-sale", Quantity: 1})
			if !errors.Is(err, order.ErrProductNotFound) {
				t.Fatalf("err %v, want product not found (the catalog has no such SKU)", err)
			}
			a := c.sku(t, "nosale", 5, 0)
			_, err = c.buy(c.user(t), order.Line{SKU: a, Quantity: 1}, order.Line{SKU: "never-on-sale", Quantity: 1})
			wantSKUs(t, err, apperr.CodeSaleNotActive, "never-on-sale")
			if got := c.available(t, a); got[0] != 5 {
				t.Fatalf("available %v, want [5]", got)
			}
		},
		"idempotency key": func(t *testing.T, c *contract) {
			a := c.sku(t, "idem", 10, 0)
			u := c.user(t)
			o := order.PlaceOptions{IdemKey: "k"}
			first, err := c.svc.Place(context.Background(), u, []order.Line{{SKU: a, Quantity: 2}}, o)
			if err != nil {
				t.Fatal(err)
			}
			again, err := c.svc.Place(context.Background(), u, []order.Line{{SKU: a, Quantity: 2}}, o)
			if err != nil || !again.Replayed || again.OrderID != first.OrderID {
				t.Fatalf("repeat %+v %v, want the first order %s replayed", again, err, first.OrderID)
			}
			_, err = c.svc.Place(context.Background(), u, []order.Line{{SKU: a, Quantity: 3}}, o)
			if !errors.Is(err, order.ErrIdempotencyKeyReused) {
				t.Fatalf("another request with the key: %v", err)
			}
			if got := c.available(t, a); got[0] != 8 {
				t.Fatalf("available %v, want [8]: bought once", got)
			}
		},
		"race sells exactly the stock": func(t *testing.T, c *contract) {
			const units, buyers = 20, 60
			a, b := c.sku(t, "race-a", units, 0), c.sku(t, "race-b", 1000, 0)
			users := make([]string, buyers)
			for i := range users {
				users[i] = c.user(t)
			}
			var sold atomic.Int64
			var buys []func()
			for _, u := range users {
				buys = append(buys, func() {
					_, err := c.buy(u, order.Line{SKU: a, Quantity: 1}, order.Line{SKU: b, Quantity: 1})
					switch {
					case err == nil:
						sold.Add(1)
					case !errors.Is(err, order.ErrOutOfStock):
						t.Error(err)
					}
				})
			}
			ordertesting.Together(buys...)
			if got := c.available(t, a, b); sold.Load() != units || got[0] != 0 || got[1] != 1000-units {
				t.Fatalf("sold %d, available %v; want %d and [0 %d]", sold.Load(), got, units, 1000-units)
			}
		},
	}))
}
