package draw

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/racetest"
)

// shopperAction is the test provider whose holds need the shopper (3-D
// Secure): the hold is made, but Enter hears requires_action, so its
// entry stays authorizing until the provider's webhook.
type shopperAction struct{ *order.TestProvider }

func (p shopperAction) Authorize(ctx context.Context, c order.Charge) (order.Payment, error) {
	pay, err := p.TestProvider.Authorize(ctx, c)
	pay.Status = "requires_action"
	return pay, err
}

// authorizing opens a draw of units and has n shoppers enter it through
// a provider that needs them: n authorizing entries, by id -> hold id.
func (f *fixture) authorizing(t *testing.T, units, n int) (int64, map[string]string) {
	t.Helper()
	f.svc.pay = shopperAction{f.pay}
	round := f.draw(t, "drop", units, 1)
	holds := map[string]string{}
	for _, u := range ordertesting.Users(t, f.db.Pool, n) {
		e := f.enter(t, u, "drop", 1)
		if e.State != StateAuthorizing {
			t.Fatalf("entry %+v, want authorizing", e.Entry)
		}
		holds[e.ID] = e.Payment.ID
	}
	return round, holds
}

func held(id string) order.Payment {
	return order.Payment{Provider: "test", ID: id, Status: order.PaymentAuthorized, AmountCents: 100}
}

func (f *fixture) seen(t *testing.T, entry string, p order.Payment, want string) {
	t.Helper()
	if got, err := f.svc.HoldSeen(context.Background(), entry, p); err != nil || got != want {
		t.Fatalf("HoldSeen(%s, %s): %q %v, want %q", entry, p.Status, got, err, want)
	}
}

// The webhook of an authorisation the shopper finished enters the entry
// while the draw is open (once: a repeat does nothing), and the entry is
// drawn like any; after the close it is lost and its hold released.
func TestHoldSeenEntersOrLoses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round, holds := f.authorizing(t, 1, 2)
	var early, late string
	for id := range holds {
		if early == "" {
			early = id
		} else {
			late = id
		}
	}
	f.seen(t, early, held(holds[early]), SeenEntered)
	f.seen(t, early, held(holds[early]), "")
	if _, err := f.db.Pool.Exec(context.Background(), closeSQL, round); err != nil { // the draw's first step
		t.Fatal(err)
	}
	f.seen(t, late, held(holds[late]), SeenReleased)
	f.seen(t, late, held(holds[late]), "")
	if err := f.svc.Run(context.Background(), round); err != nil {
		t.Fatal(err)
	}
	got := f.outcome(t, round)
	if got[early].state != StateWon || got[late].state != StateLost {
		t.Fatalf("after the draw: %+v", got)
	}
	h := f.pay.Holds()
	if h[holds[early]].CapturedCents != 100 || h[holds[early]].Canceled || !h[holds[late]].Canceled {
		t.Fatalf("holds %+v", h)
	}
}

// Webhooks of authorising shoppers racing the close: every entry is
// either ranked and drawn (its hold captured, not cancelled) or lost
// (its hold cancelled, nothing captured); none is left authorizing or
// holding.
func TestHoldSeenRacesTheClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n, units = 8, 3
	round, holds := f.authorizing(t, units, n)
	var ops []func()
	errs := make(chan error, n+1)
	for id, pi := range holds {
		ops = append(ops, func() {
			_, err := f.svc.HoldSeen(context.Background(), id, held(pi))
			errs <- err
		})
	}
	ops = append(ops, func() { errs <- f.svc.Run(context.Background(), round) })
	racetest.Together(ops...)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	won := 0
	h := f.pay.Holds()
	for id, r := range f.outcome(t, round) {
		hold := h[holds[id]]
		switch {
		case r.state == StateWon && hold.CapturedCents == 100 && !hold.Canceled:
			won++
		case r.state == StateLost && hold.Canceled && hold.CapturedCents == 0:
		default:
			t.Errorf("entry %s %+v, hold %+v", id, r, hold)
		}
	}
	if entered := f.count(t, `SELECT count(*) FROM draw_entries WHERE rank IS NOT NULL`); won != int(min(entered, units)) {
		t.Errorf("%d won, %d ranked, %d units", won, entered, units)
	}
}

// A succeeded or canceled intent that its entry contradicts is recorded
// for the audit, not repaired; a succeeded capture not yet recorded (a
// draw under way) is no contradiction.
func TestHoldSeenRecordsMismatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round, _, holds := f.drawEntered(t, 1, 1, 2)
	for id, pi := range holds { // as if the draw were capturing it: no contradiction yet
		if _, err := f.db.Pool.Exec(context.Background(), `UPDATE draw_entries SET won_units = 1 WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		f.seen(t, id, order.Payment{ID: pi, Status: order.PaymentSucceeded}, "")
		// Back to the entry as entered: only the draw's allocation sets
		// won_units, and it reads just the ranks that can still win.
		if _, err := f.db.Pool.Exec(context.Background(), `UPDATE draw_entries SET won_units = 0 WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		break
	}
	if err := f.svc.Run(context.Background(), round); err != nil {
		t.Fatal(err)
	}
	var winner, loser string
	for id, r := range f.outcome(t, round) {
		if r.state == StateWon {
			winner = id
		} else {
			loser = id
		}
	}
	settled := func(id, status string) order.Payment {
		return order.Payment{Provider: "test", ID: holds[id], Status: status}
	}
	f.seen(t, winner, settled(winner, order.PaymentSucceeded), "")
	f.seen(t, loser, settled(loser, order.PaymentCanceled), "")
	f.seen(t, loser, settled(loser, order.PaymentSucceeded), "mismatch: "+MismatchSucceededNotWon)
	f.seen(t, winner, settled(winner, order.PaymentCanceled), "mismatch: "+MismatchCanceledWon)
	for id, want := range map[string]string{winner: MismatchCanceledWon, loser: MismatchSucceededNotWon} {
		if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE id = $1 AND payment_mismatch = $2
			AND payment_mismatch_at IS NOT NULL`, id, want); n != 1 {
			t.Errorf("entry %s: no %s recorded", id, want)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE state = 'won'`); n != 1 {
		t.Errorf("%d won after the mismatches, want 1: nothing is repaired", n)
	}

}

// A crash between the provider's authorisation and its record leaves an
// authorizing entry without its payment id: the close loses it and the
// draw finds its hold by the entry's authorisation key and cancels it.
func TestOrphanHoldIsCancelledByTheDraw(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round := f.draw(t, "drop", 1, 1)
	f.svc.InjectAfterAuthorize(func(string) error { return errCrash })
	if _, err := f.svc.Enter(context.Background(), f.user(t), "drop", Enter{Quantity: 1, Token: "tok_visa"}); !errors.Is(err, errCrash) {
		t.Fatalf("enter: %v, want the crash", err)
	}
	if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE state = 'authorizing' AND payment_id = ''`); n != 1 {
		t.Fatalf("%d orphan entries, want 1", n)
	}
	if err := f.svc.Run(context.Background(), round); err != nil {
		t.Fatal(err)
	}
	for id, h := range f.pay.Holds() {
		if !h.Canceled || h.CapturedCents != 0 {
			t.Errorf("hold %s %+v, want cancelled", id, h)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE state = 'lost' AND payment_id <> '' AND cancelled_at IS NOT NULL`); n != 1 {
		t.Fatalf("the orphan entry is not lost with its hold cancelled")
	}
}

// A hold whose entry was dropped (Enter unsure of the provider's answer)
// is released when the provider reports it, with the entry's cancel key.
func TestHoldOfNoEntryIsReleased(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.NewString()
	pay, err := f.pay.Authorize(context.Background(), order.Charge{Key: authorizeKey(id), OrderID: id, AmountCents: 100, Token: "tok_visa"})
	if err != nil {
		t.Fatal(err)
	}
	f.seen(t, id, pay, SeenOrphan)
	f.seen(t, "not-a-uuid", pay, "")
	if h := f.pay.Holds()[pay.ID]; !h.Canceled {
		t.Fatalf("hold %+v, want cancelled", h)
	}
}

// The draw's cancels are spaced by CancelEvery: one pause a cancel,
// counted through the injected pause rather than timed; the metrics
// count the capture and the cancels.
func TestCancelsArePaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round, _, _ := f.drawEntered(t, 1, 1, 5)
	var pauses []time.Duration
	f.svc.cancelEvery = 50 * time.Millisecond
	f.svc.pause = func(_ context.Context, d time.Duration) error {
		pauses = append(pauses, d)
		return nil
	}
	if err := f.svc.Run(context.Background(), round); err != nil {
		t.Fatal(err)
	}
	if len(pauses) != 4 || f.pay.Calls("cancel") != 4 {
		t.Fatalf("%d pauses for %d cancels, want 4 each", len(pauses), f.pay.Calls("cancel"))
	}
	for _, d := range pauses {
		if d != 50*time.Millisecond {
			t.Fatalf("paused %v", d)
		}
	}
	m := f.svc.metrics
	if c, n := testutil.ToFloat64(m.captures.WithLabelValues("captured")), testutil.ToFloat64(m.cancels.WithLabelValues("cancelled")); c != 1 || n != 4 {
		t.Fatalf("metrics: %v captured, %v cancelled, want 1 and 4", c, n)
	}
}

// The admin's progress and the pending gauge follow the cancels as they
// drain: read at each pause between two cancels, then once the draw ends.
func TestProgressFollowsTheCancels(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round, _, _ := f.drawEntered(t, 1, 1, 5)
	f.svc.cancelEvery = time.Millisecond
	var left, pending []int64
	f.svc.pause = func(ctx context.Context, _ time.Duration) error {
		page, err := f.svc.Entries(ctx, "drop", 1, "")
		left = append(left, page.Progress.CancelsLeft)
		pending = append(pending, int64(testutil.ToFloat64(f.svc.metrics.pending)))
		return err
	}
	if err := f.svc.Run(context.Background(), round); err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 2, 1, 0}; !slices.Equal(left, want) || !slices.Equal(pending, want) {
		t.Fatalf("cancels left %v, gauge %v, want %v each", left, pending, want)
	}
	page, err := f.svc.Entries(context.Background(), "drop", 1, "")
	if err != nil {
		t.Fatal(err)
	}
	want := Progress{Won: 1, Lost: 4, CapturedCents: 100, Cancelled: 4}
	if page.Progress != want || testutil.ToFloat64(f.svc.metrics.pending) != 0 {
		t.Fatalf("progress %+v, gauge %v; want %+v and 0", page.Progress, testutil.ToFloat64(f.svc.metrics.pending), want)
	}
}

// A draw stopped before its cancels, then resumed while reconcile (or
// the webhook) reports the losers' holds: every hold is released once,
// with its entry's cancel key, whoever asks first; none is captured.
func TestReleaseRacesTheDrawsCancels(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round, _, holds := f.drawEntered(t, 1, 1, 6)
	f.svc.cancelEvery = time.Nanosecond
	f.svc.pause = func(context.Context, time.Duration) error { return errCrash }
	if err := f.svc.Run(context.Background(), round); !errors.Is(err, errCrash) {
		t.Fatalf("first run: %v, want it stopped after its first cancel", err)
	}
	f.svc.pause = func(context.Context, time.Duration) error { return nil }
	ops := []func(){func() {
		if err := f.svc.Run(context.Background(), round); err != nil {
			t.Error(err)
		}
	}}
	for id, pi := range holds {
		for range 2 {
			ops = append(ops, func() {
				if _, err := f.svc.HoldSeen(context.Background(), id, held(pi)); err != nil {
					t.Error(err)
				}
			})
		}
	}
	racetest.Together(ops...)
	for id, r := range f.outcome(t, round) {
		h := f.pay.Holds()[holds[id]]
		if r.state == StateWon {
			if h.Canceled || h.CapturedCents != 100 {
				t.Errorf("winner %s: hold %+v", id, h)
			}
			continue
		}
		keyed, found, _ := f.pay.FindHold(context.Background(), cancelKey(id))
		if !h.Canceled || h.CapturedCents != 0 || !found || keyed.ID != holds[id] {
			t.Errorf("%s entry %s: hold %+v, cancel key used %v", r.state, id, h, found)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE state <> 'won' AND cancelled_at IS NULL`); n != 0 {
		t.Errorf("%d losers not recorded as released", n)
	}
	if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE state = 'won' AND cancelled_at IS NOT NULL`); n != 0 {
		t.Errorf("a winner's hold was asked to be released")
	}
}
