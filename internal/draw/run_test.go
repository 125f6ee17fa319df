package draw

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/racetest"
)

// failing is the test provider whose captures of some holds fail, as a
// card's would.
type failing struct {
	*order.TestProvider
	mu    sync.Mutex
	holds map[string]bool
}

func (p *failing) Capture(ctx context.Context, id string, cents int64, key string) (order.Payment, error) {
	p.mu.Lock()
	fail := p.holds[id]
	p.mu.Unlock()
	if fail {
		return order.Payment{}, order.ErrPaymentDeclined
	}
	return p.TestProvider.Capture(ctx, id, cents, key)
}

// drawEntered opens a draw of units on "drop" with a per-shopper limit
// and has n shoppers enter it, asking 1, 2, … up to the limit in turn, so
// that entries of every size meet in the ranking. It returns the round,
// entry id -> units and entry id -> hold id.
func (f *fixture) drawEntered(t *testing.T, units, limit, n int) (int64, map[string]int, map[string]string) {
	t.Helper()
	round := f.draw(t, "drop", units, limit)
	entries, holds := map[string]int{}, map[string]string{}
	for i, u := range ordertesting.Users(t, f.db.Pool, n) {
		e := f.enter(t, u, "drop", 1+i%limit)
		entries[e.ID], holds[e.ID] = e.Quantity, e.Payment.ID
	}
	return round, entries, holds
}

// check compares the draw's rows and the provider's holds with ex: every
// winner captured once for its units, every other hold cancelled, the
// winners' digest published.
func (f *fixture) check(t *testing.T, round int64, sku string, units int, ex expected, holds map[string]string) {
	t.Helper()
	got := f.outcome(t, round)
	total := 0
	for id, r := range got {
		if r.won != ex.won[id] {
			t.Errorf("entry %s (rank %d, %s) won %d, want %d", id, r.rank, r.state, r.won, ex.won[id])
		}
		total += r.won
		h := f.pay.Holds()[holds[id]]
		switch {
		case r.state == StateWon && (h.CapturedCents != int64(r.won)*100 || h.Canceled):
			t.Errorf("winner %s: hold %+v, want %d captured", id, h, r.won*100)
		case r.state != StateWon && (!h.Canceled || h.CapturedCents != 0):
			t.Errorf("%s entry %s: hold %+v, want cancelled", r.state, id, h)
		}
	}
	for i, id := range ex.order {
		if got[id].rank != i+1 {
			t.Errorf("entry %s ranked %d, want %d", id, got[id].rank, i+1)
		}
	}
	if want := min(units, sumUnits(ex.won)); total != want {
		t.Errorf("won %d units, want %d", total, want)
	}
	p, err := f.svc.Get(context.Background(), sku)
	if err != nil || p.State != "drawn" || p.WinnersSHA256 == nil || *p.WinnersSHA256 != ex.winners ||
		p.Seed == nil || *p.Seed != f.seed(t, round) {
		t.Errorf("public %+v %v, want drawn with winners %s", p, err, ex.winners)
	}
}

func sumUnits(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// More units asked than the round has: the units won equal its quantity
// exactly, the last winner's partially, in the seed's order.
func TestDrawAllocatesTheQuantityExactly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const units = 20
	round, entries, holds := f.drawEntered(t, units, 3, 25)
	if _, err := f.svc.Close(context.Background(), "drop"); err != nil {
		t.Fatal(err)
	}
	ex := expect(f.seed(t, round), entries, units, nil)
	if sumUnits(ex.won) != units {
		t.Fatalf("the expectation wins %d", sumUnits(ex.won))
	}
	f.check(t, round, "drop", units, ex, holds)
	if n := f.pay.Calls("capture"); n != len(ex.won) {
		t.Fatalf("%d captures, want %d", n, len(ex.won))
	}
	partial := false
	for id, n := range ex.won {
		partial = partial || n < entries[id]
	}
	t.Logf("%d winners, a partial one: %v", len(ex.won), partial)
}

// A capture that fails makes its entry failed, and its units go on to
// the next ranks; its hold is cancelled.
func TestDrawCaptureFailurePassesUnitsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pay := &failing{TestProvider: f.pay, holds: map[string]bool{}}
	f.svc.pay = pay
	const units = 4
	round, entries, holds := f.drawEntered(t, units, 2, 8)
	ex := expect(f.seed(t, round), entries, units, nil)
	fails := map[string]bool{ex.order[0]: true, ex.order[2]: true} // two of the first winners' cards fail
	for id := range fails {
		pay.holds[holds[id]] = true
	}
	if _, err := f.svc.Close(context.Background(), "drop"); err != nil {
		t.Fatal(err)
	}
	ex = expect(f.seed(t, round), entries, units, fails)
	f.check(t, round, "drop", units, ex, holds)
	for id := range fails {
		if got := f.outcome(t, round)[id]; got.state != StateFailed {
			t.Fatalf("entry %s %+v, want failed", id, got)
		}
	}
}

var errCrash = errors.New("crash")

// A draw stopped between captures (as a crash would) and run again ends
// as an uninterrupted one: same ranks, same winners, each captured once
// (the capture asked again uses the same key), every other hold cancelled.
func TestDrawResumesAfterACrash(t *testing.T) {
	t.Parallel()
	for _, crashAt := range []int{1, 3} {
		t.Run(fmt.Sprintf("after capture %d", crashAt), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			orders := f.withOrders()
			const units = 6
			round, entries, holds := f.drawEntered(t, units, 2, 10)
			captures := 0
			f.svc.InjectAfterCapture(func(string) error {
				if captures++; captures == crashAt {
					return errCrash
				}
				return nil
			})
			if _, err := f.svc.Close(context.Background(), "drop"); !errors.Is(err, errCrash) {
				t.Fatalf("close: %v, want the crash", err)
			}
			if p, _ := f.svc.Get(context.Background(), "drop"); p.State != "closed" {
				t.Fatalf("a stopped draw reads %s", p.State)
			}
			if n, err := f.svc.RunDue(context.Background()); err != nil || n != 1 {
				t.Fatalf("resume: %d %v", n, err)
			}
			ex := expect(f.seed(t, round), entries, units, nil)
			f.check(t, round, "drop", units, ex, holds)
			if n := f.pay.Calls("capture"); n != len(ex.won)+1 {
				t.Fatalf("%d capture calls, want %d (the winners, and the one asked again)", n, len(ex.won)+1)
			}
			if n, err := f.svc.RunDue(context.Background()); err != nil || n != 0 {
				t.Fatalf("a drawn draw is due again: %d %v", n, err)
			}
			// One paid order per winner, its units taken once.
			if live, _, err := f.stock.Live(context.Background(), "drop"); err != nil || live.Available != 0 {
				t.Fatalf("live %+v %v, want every unit won", live, err)
			}
			users := f.count(t, `SELECT count(DISTINCT user_id) FROM draw_entries WHERE state = 'won'`)
			for id := range ex.won {
				var user, orderID string
				if err := f.db.Pool.QueryRow(context.Background(),
					`SELECT user_id::text, order_id::text FROM draw_entries WHERE id = $1`, id).Scan(&user, &orderID); err != nil {
					t.Fatal(err)
				}
				o, err := orders.Get(context.Background(), user, orderID)
				if err != nil || o.Status != order.StatusPaid || len(o.Items) != 1 || o.Items[0].Quantity != ex.won[id] {
					t.Fatalf("winner %s's order %+v %v", id, o, err)
				}
			}
			if users != int64(len(ex.won)) {
				t.Fatalf("%d winners, want %d", users, len(ex.won))
			}
		})
	}
}

// Several instances drawing the same round at once (a lost lock): the
// rows keep the outcome that of one draw, each winner captured once.
func TestDrawRunnersRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const units = 7
	round, entries, holds := f.drawEntered(t, units, 2, 12)
	errs := make([]error, 6)
	racetest.Together(racetest.Times(len(errs), func(i int) {
		errs[i] = f.svc.Run(context.Background(), round)
	})...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("runner %d: %v", i, err)
		}
	}
	f.check(t, round, "drop", units, expect(f.seed(t, round), entries, units, nil), holds)
}

// The runner draws a draw once its closes_at has passed, not before.
func TestRunDueDrawsAtTheClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	round, entries, holds := f.drawEntered(t, 2, 1, 3)
	if n, err := f.svc.RunDue(ctx); err != nil || n != 0 {
		t.Fatalf("before the close: ran %d %v", n, err)
	}
	if _, err := f.db.Pool.Exec(ctx, `UPDATE sale_rounds SET draw_closes_at = now() - interval '1 second' WHERE id = $1`,
		round); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Enter(ctx, f.user(t), "drop", Enter{Quantity: 1, Token: "tok_visa"}); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("enter past the close, before the draw: %v", err)
	}
	if n, err := f.svc.RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("after the close: ran %d %v", n, err)
	}
	f.check(t, round, "drop", 2, expect(f.seed(t, round), entries, 2, nil), holds)
}
