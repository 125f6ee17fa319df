package draw

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/racetest"
)

// Every rule of an entry (docs/api.md, Draws): its authorisation, one
// per shopper, the limit, Idempotency-Key, a decline, a withdrawal, and
// the draws that are not open.
func TestEntryRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.draw(t, "drop", 5, 2)
	ann, bob := f.user(t), f.user(t)

	e := f.enter(t, ann, "drop", 2)
	if e.State != StateEntered || e.Replayed || e.Quantity != 2 || e.Payment == nil ||
		e.Payment.Status != order.PaymentAuthorized || e.Payment.AmountCents != 200 || e.OrderID != nil {
		t.Fatalf("entry %+v %+v", e, e.Payment)
	}
	if h := f.pay.Holds()[e.Payment.ID]; h.AmountCents != 200 || h.CapturedCents != 0 || h.Canceled {
		t.Fatalf("hold %+v", h)
	}
	if mine, err := f.svc.Mine(ctx, ann, "drop"); err != nil || mine.ID != e.ID {
		t.Fatalf("mine %+v %v", mine, err)
	}
	_, err := f.svc.Enter(ctx, ann, "drop", Enter{Quantity: 1, Token: "tok_visa"})
	wantCode(t, "a second entry", err, apperr.CodeAlreadyEntered)

	// Idempotency-Key: a repeat answers the first entry, another request
	// with it is refused.
	k1, err := f.svc.Enter(ctx, bob, "drop", Enter{Quantity: 1, Token: "tok_visa", IdemKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.Enter(ctx, bob, "drop", Enter{Quantity: 1, Token: "tok_visa", IdemKey: "k1"})
	if err != nil || !again.Replayed || again.ID != k1.ID {
		t.Fatalf("repeat %+v %v, want %s replayed", again, err, k1.ID)
	}
	_, err = f.svc.Enter(ctx, bob, "drop", Enter{Quantity: 2, Token: "tok_visa", IdemKey: "k1"})
	wantCode(t, "the key with another quantity", err, apperr.CodeIdempotencyReused)
	if f.pay.Calls("authorize") != 2 {
		t.Fatalf("%d authorisations, want 2", f.pay.Calls("authorize"))
	}

	// Over the limit, declined: nothing recorded.
	cy := f.user(t)
	_, err = f.svc.Enter(ctx, cy, "drop", Enter{Quantity: 3, Token: "tok_visa"})
	wantCode(t, "over the limit", err, apperr.CodeInvalidRequest)
	_, err = f.svc.Enter(ctx, cy, "drop", Enter{Quantity: 1, Token: order.DeclinedToken})
	wantCode(t, "declined", err, apperr.CodePaymentDeclined)
	if _, err := f.svc.Mine(ctx, cy, "drop"); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("a declined shopper's entry: %v", err)
	}
	f.enter(t, cy, "drop", 1) // the place was freed

	// A withdrawal releases the hold; the shopper may enter again.
	w, err := f.svc.Withdraw(ctx, ann, "drop")
	if err != nil || w.ID != e.ID || w.State != StateWithdrawn {
		t.Fatalf("withdraw %+v %v", w, err)
	}
	if h := f.pay.Holds()[e.Payment.ID]; !h.Canceled {
		t.Fatalf("withdrawn hold %+v, want cancelled", h)
	}
	if w2, err := f.svc.Withdraw(ctx, ann, "drop"); err != nil || w2.ID != e.ID || w2.State != StateWithdrawn {
		t.Fatalf("withdraw again %+v %v", w2, err)
	}
	e2 := f.enter(t, ann, "drop", 1)
	if e2.ID == e.ID {
		t.Fatal("re-entry kept the withdrawn entry's id")
	}
	if p, err := f.svc.Get(ctx, "drop"); err != nil || p.Entries != 3 || p.State != inventory.DrawOpen ||
		p.Seed != nil || p.WinnersSHA256 != nil || p.Units != 5 {
		t.Fatalf("public %+v %v", p, err)
	}

	// Unknown products, products without a draw, a draw not yet open.
	_, err = f.svc.Enter(ctx, ann, "nope", Enter{Quantity: 1, Token: "tok_visa"})
	wantCode(t, "unknown sku", err, apperr.CodeNotFound)
	ordertesting.OpenSale(t, f.db.Pool, f.stock, f.r, "plain", 5, 1, 100)
	_, err = f.svc.Enter(ctx, ann, "plain", Enter{Quantity: 1, Token: "tok_visa"})
	wantCode(t, "no draw", err, apperr.CodeSaleNotActive)
	_, err = f.svc.Get(ctx, "plain")
	wantCode(t, "public of no draw", err, apperr.CodeNotFound)
	ordertesting.OpenSaleWith(t, f.db.Pool, f.stock, f.r, "later", 100, inventory.Seed{Quantity: 1,
		StartsAt: time.Now().Add(time.Hour), Draw: &inventory.DrawSettings{ClosesAt: time.Now().Add(2 * time.Hour)}})
	_, err = f.svc.Enter(ctx, ann, "later", Enter{Quantity: 1, Token: "tok_visa"})
	wantCode(t, "upcoming", err, apperr.CodeSaleNotActive)

	// After the close: no entry, no withdrawal.
	if _, err := f.svc.Close(ctx, "drop"); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Enter(ctx, f.user(t), "drop", Enter{Quantity: 1, Token: "tok_visa"})
	wantCode(t, "enter after the close", err, apperr.CodeSaleNotActive)
	_, err = f.svc.Withdraw(ctx, bob, "drop")
	wantCode(t, "withdraw after the close", err, apperr.CodeDrawClosed)
	_, err = f.svc.Close(ctx, "drop")
	wantCode(t, "close twice", err, apperr.CodeConflict)
}

// Many requests of one shopper at once, each with its own key: exactly
// one entry, one authorisation; the rest already_entered. With one key:
// every answer is the same entry.
func TestEnterRaceOneShopper(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.draw(t, "drop", 5, 1)
	for _, sameKey := range []bool{false, true} {
		u := f.user(t)
		const n = 24
		ids := make([]string, n)
		errs := make([]error, n)
		racetest.Together(racetest.Times(n, func(i int) {
			key := "k"
			if !sameKey {
				key += string(rune('a' + i))
			}
			e, err := f.svc.Enter(context.Background(), u, "drop", Enter{Quantity: 1, Token: "tok_visa", IdemKey: key})
			ids[i], errs[i] = e.ID, err
		})...)
		entered := map[string]bool{}
		for i := range n {
			switch {
			case errs[i] == nil:
				entered[ids[i]] = true
			case !sameKey && errors.Is(errs[i], ErrAlreadyEntered):
			default:
				t.Fatalf("same key %v: request %d: %v", sameKey, i, errs[i])
			}
		}
		if len(entered) != 1 || f.count(t, `SELECT count(*) FROM draw_entries WHERE user_id = $1`, u) != 1 {
			t.Fatalf("same key %v: entries %v, rows %d", sameKey, entered,
				f.count(t, `SELECT count(*) FROM draw_entries WHERE user_id = $1`, u))
		}
	}
}

// Many shoppers entering at once all get in, each with its own hold.
func TestEnterRaceManyShoppers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round := f.draw(t, "drop", 5, 1)
	const n = 40
	users := ordertesting.Users(t, f.db.Pool, n)
	errs := make([]error, n)
	racetest.Together(racetest.Times(n, func(i int) {
		_, errs[i] = f.svc.Enter(context.Background(), users[i], "drop", Enter{Quantity: 1, Token: "tok_visa"})
	})...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("shopper %d: %v", i, err)
		}
	}
	if got := f.count(t, `SELECT count(*) FROM draw_entries WHERE round_id = $1 AND state = 'entered'`, round); got != n {
		t.Fatalf("%d entries, want %d", got, n)
	}
	if len(f.pay.Holds()) != n {
		t.Fatalf("%d holds, want %d", len(f.pay.Holds()), n)
	}
}

// slowAuth is the test provider whose authorisations wait for release.
type slowAuth struct {
	*order.TestProvider
	asked, release chan struct{}
}

func (p *slowAuth) Authorize(ctx context.Context, c order.Charge) (order.Payment, error) {
	p.asked <- struct{}{}
	<-p.release
	return p.TestProvider.Authorize(ctx, c)
}

// An entry whose authorisation comes back after the close takes no part:
// it is lost, its hold cancelled, and its shopper told the draw is not
// open.
func TestEntryAuthorisedAfterTheClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	round := f.draw(t, "drop", 1, 1)
	slow := &slowAuth{TestProvider: f.pay, asked: make(chan struct{}), release: make(chan struct{})}
	f.svc.pay = slow
	done := make(chan error, 1)
	go func() {
		_, err := f.svc.Enter(ctx, f.user(t), "drop", Enter{Quantity: 1, Token: "tok_visa"})
		done <- err
	}()
	<-slow.asked
	if _, err := f.svc.Close(ctx, "drop"); err != nil {
		t.Fatal(err)
	}
	close(slow.release)
	if err := <-done; !errors.Is(err, ErrNotOpen) {
		t.Fatalf("enter: %v, want sale_not_active", err)
	}
	for id, h := range f.pay.Holds() {
		if !h.Canceled || h.CapturedCents != 0 {
			t.Fatalf("hold %s %+v, want cancelled", id, h)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE round_id = $1 AND state = 'lost' AND rank IS NULL
		AND cancelled_at IS NOT NULL`, round); n != 1 {
		t.Fatalf("%d lost and cancelled entries, want 1", n)
	}
}
