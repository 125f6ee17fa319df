package saga

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/order"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/room/roomkey"
)

// The pass (docs/api.md, "The pass"): a line of a round with a waiting room
// needs the buyer's live pass, checked in the stock-taking step. The
// admitter is room's; these tests write its pass hash directly, in its
// format (roomkey.Keys.Passes).

// roomed opens a sale of units (limit per user) with a waiting room; it
// returns the SKU and its round.
func (c *contract) roomed(t *testing.T, name string, units, limit int) (string, int64) {
	t.Helper()
	return c.open(t, name, inventory.Seed{Quantity: units, PerUserLimit: limit,
		Room: &inventory.RoomSettings{AdmitPerSecond: 10, PassTTL: 2 * time.Minute}})
}

// admit writes user's pass of round for sku as the admitter would, and
// returns the pass.
func (c *contract) admit(t *testing.T, sku, user string, round int64, expires time.Time) string {
	t.Helper()
	pass := uuid.NewString()
	field := fmt.Sprintf("%d %s %d %d", round, pass, expires.UnixMilli(), time.Now().UnixMilli())
	if err := c.store.HSet(context.Background(), roomkey.New(c.stock).Passes(sku), user, field).Err(); err != nil {
		t.Fatal(err)
	}
	return pass
}

func (c *contract) buyWith(user string, passes []string, lines ...order.Line) (order.Placed, error) {
	return c.svc.Place(context.Background(), user, lines, order.PlaceOptions{Passes: passes})
}

// untouched fails t unless sku still has available units and user bought
// none of it and has no pending order.
func (c *contract) untouched(t *testing.T, sku, user string, available int64) {
	t.Helper()
	ctx := context.Background()
	if got := c.available(t, sku); got[0] != available {
		t.Errorf("available %v, want [%d]: nothing reserved", got, available)
	}
	if n, err := c.store.HGet(ctx, c.stock.BuyersKey(sku), user).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("buyer count %q (%v), want none", n, err)
	}
	if n, err := c.store.ZCard(ctx, c.ledger.Keys(0).PendingKey(user)).Result(); err != nil || n != 0 {
		t.Errorf("%d pending orders (%v), want none", n, err)
	}
}

// withRoomCases adds the waiting room's cases to the placers' contract.
func withRoomCases(cases map[string]func(*testing.T, *contract)) map[string]func(*testing.T, *contract) {
	later := time.Now().Add(time.Hour)
	maps.Copy(cases, map[string]func(*testing.T, *contract){
		"room: no pass": func(t *testing.T, c *contract) {
			a, _ := c.roomed(t, "room-none", 10, 0)
			u := c.user(t)
			_, err := c.buy(u, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			if !errors.Is(err, order.ErrPassRequired) {
				t.Errorf("err %v, want order.ErrPassRequired", err)
			}
			_, err = c.buyWith(u, []string{"", "not-a-pass"}, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			c.untouched(t, a, u, 10)
		},
		"room: another's pass": func(t *testing.T, c *contract) {
			a, round := c.roomed(t, "room-other", 10, 0)
			owner, u := c.user(t), c.user(t)
			theirs := c.admit(t, a, owner, round, later)
			_, err := c.buyWith(u, []string{theirs}, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			c.admit(t, a, u, round, later) // admitted too, with a pass of their own
			_, err = c.buyWith(u, []string{theirs}, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			c.untouched(t, a, u, 10)
		},
		"room: an older round's pass": func(t *testing.T, c *contract) {
			a, round := c.roomed(t, "room-old", 10, 0)
			u := c.user(t)
			pass := c.admit(t, a, u, round-1, later)
			_, err := c.buyWith(u, []string{pass}, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			c.untouched(t, a, u, 10)
		},
		"room: an expired pass": func(t *testing.T, c *contract) {
			a, round := c.roomed(t, "room-expired", 10, 0)
			u := c.user(t)
			pass := c.admit(t, a, u, round, time.Now().Add(-time.Second))
			_, err := c.buyWith(u, []string{pass}, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			c.untouched(t, a, u, 10)
		},
		"room: the pass buys": func(t *testing.T, c *contract) {
			a, round := c.roomed(t, "room-pass", 10, 0)
			u := c.user(t)
			pass := c.admit(t, a, u, round, later)
			_, err := c.buy(u, order.Line{SKU: a, Quantity: 2}) // admitted, but the pass not shown
			wantSKUs(t, err, apperr.CodePassRequired, a)
			p, err := c.buyWith(u, []string{"junk", pass, "a,b"}, order.Line{SKU: a, Quantity: 2})
			if err != nil || p.OrderID == "" {
				t.Fatalf("placed %+v, %v", p, err)
			}
			if got := c.available(t, a); got[0] != 8 {
				t.Fatalf("available %v, want [8]", got)
			}
		},
		"room: a repeat of the key needs no pass": func(t *testing.T, c *contract) {
			a, round := c.roomed(t, "room-idem", 10, 0)
			u := c.user(t)
			pass := c.admit(t, a, u, round, later)
			first, err := c.svc.Place(context.Background(), u, []order.Line{{SKU: a, Quantity: 2}}, order.PlaceOptions{IdemKey: "k", Passes: []string{pass}})
			if err != nil {
				t.Fatal(err)
			}
			again, err := c.svc.Place(context.Background(), u, []order.Line{{SKU: a, Quantity: 2}}, order.PlaceOptions{IdemKey: "k"})
			if err != nil || !again.Replayed || again.OrderID != first.OrderID {
				t.Fatalf("repeat %+v %v, want the first order %s replayed", again, err, first.OrderID)
			}
			_, err = c.svc.Place(context.Background(), u, []order.Line{{SKU: a, Quantity: 2}}, order.PlaceOptions{IdemKey: "k2"})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			if got := c.available(t, a); got[0] != 8 {
				t.Fatalf("available %v, want [8]: bought once", got)
			}
		},
		"room: a pass outranks limit and stock, not a closed sale": func(t *testing.T, c *contract) {
			a, _ := c.roomed(t, "room-rank-a", 10, 0)
			b := c.sku(t, "room-rank-b", 1, 0)
			u := c.user(t)
			_, err := c.buy(u, order.Line{SKU: b, Quantity: 2}, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			_, err = c.buy(u, order.Line{SKU: a, Quantity: 1}, order.Line{SKU: "never-on-sale", Quantity: 1})
			wantSKUs(t, err, apperr.CodeSaleNotActive, "never-on-sale")
			c.untouched(t, a, u, 10)
		},
		"room: a checkout of two roomed SKUs, a pass each": func(t *testing.T, c *contract) {
			a, ra := c.roomed(t, "room-two-a", 10, 0)
			b, rb := c.roomed(t, "room-two-b", 10, 0)
			u := c.user(t)
			pa, pb := c.admit(t, a, u, ra, later), c.admit(t, b, u, rb, later)
			_, err := c.buyWith(u, []string{pa}, order.Line{SKU: a, Quantity: 1}, order.Line{SKU: b, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, b)
			if got := c.available(t, a, b); got[0] != 10 || got[1] != 10 {
				t.Fatalf("available %v after a refusal, want [10 10]", got)
			}
			if _, err := c.buyWith(u, order.ParsePasses(pa+", "+pb), order.Line{SKU: a, Quantity: 1}, order.Line{SKU: b, Quantity: 3}); err != nil {
				t.Fatal(err)
			}
			if got := c.available(t, a, b); got[0] != 9 || got[1] != 7 {
				t.Fatalf("available %v, want [9 7]", got)
			}
		},
		"room: one pass raced within the limit": func(t *testing.T, c *contract) {
			const tries = 20
			a, round := c.roomed(t, "room-race", 10, 1)
			u := c.user(t)
			pass := c.admit(t, a, u, round, later)
			_, err := c.buyWith(u, []string{"x" + pass}, order.Line{SKU: a, Quantity: 1})
			wantSKUs(t, err, apperr.CodePassRequired, a)
			var sold, limited atomic.Int64
			var buys []func()
			for range tries {
				buys = append(buys, func() {
					_, err := c.buyWith(u, []string{pass}, order.Line{SKU: a, Quantity: 1})
					switch {
					case err == nil:
						sold.Add(1)
					case errors.Is(err, order.ErrLimitExceeded):
						limited.Add(1)
					default:
						t.Error(err)
					}
				})
			}
			ordertesting.Together(buys...)
			if got := c.available(t, a); sold.Load() != 1 || limited.Load() != tries-1 || got[0] != 9 {
				t.Fatalf("sold %d, refused %d, available %v; want 1, %d, [9]", sold.Load(), limited.Load(), got, tries-1)
			}
		},
	})
	return cases
}
