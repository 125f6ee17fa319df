package order

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// slowProvider is the test provider whose payments with ThreeDSToken
// need the shopper (Stripe's requires_action), as a real card's may.
type slowProvider struct{ *TestProvider }

const threeDSToken = "pm_3ds"

func (p slowProvider) Charge(ctx context.Context, c Charge) (Payment, error) {
	pay, err := p.TestProvider.Charge(ctx, c)
	if err == nil && c.Token == threeDSToken {
		pay.Status, pay.ClientSecret = "requires_action", pay.ID+"_secret"
	}
	return pay, err
}

// withProvider rebuilds the fixture's service with provider p and a
// payment window of an hour.
func (f *fixture) withProvider(p PaymentProvider) {
	f.svc = New(f.db.Pool, f.r.Client, f.stock, f.svc.exists, f.r.Prefix, f.svc.log, prometheus.NewRegistry(),
		Options{PaymentTTL: time.Hour, Payments: p})
}

func (f *fixture) payment(t *testing.T, user, id string) *Payment {
	t.Helper()
	o, err := f.svc.Get(context.Background(), user, id)
	if err != nil {
		t.Fatal(err)
	}
	return o.Payment
}

// A payment that needs the shopper leaves the order confirmed with the
// payment's status and client secret; the provider's report of its
// success pays the order, and later reports never move it back.
func TestIncompletePaymentIsFinishedByItsReport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	provider := slowProvider{NewTestProvider()}
	f.withProvider(provider)
	f.sale(t, "slow", 3, 0, 700)
	user := f.user(t)
	ctx := context.Background()
	id := f.place(t, user, "slow", 1).OrderID
	f.writeAll(t)
	if p := f.payment(t, user, id); p != nil {
		t.Fatalf("payment before any: %+v", p)
	}

	o, err := f.svc.Pay(ctx, user, id, threeDSToken)
	if err != nil || o.Status != StatusConfirmed || o.Payment == nil || o.Payment.Status != "requires_action" ||
		o.Payment.ClientSecret == "" || o.Payment.Provider != "test" || o.Payment.AmountCents != 700 {
		t.Fatalf("pay = %+v (payment %+v) %v, want confirmed with a requires_action payment", o, o.Payment, err)
	}
	if p := f.payment(t, user, id); p == nil || *p != *o.Payment {
		t.Fatalf("order shows payment %+v, want %+v", p, o.Payment)
	}

	pay := *o.Payment
	for range 2 {
		if got, err := f.svc.PaymentSucceeded(ctx, id, pay); err != nil {
			t.Fatal(err)
		} else if got != SettledPaid && got != SettledUnchanged {
			t.Fatalf("report: %s", got)
		}
	}
	if st := f.status(t, id); st != StatusPaid {
		t.Fatalf("status %s after the success report", st)
	}
	if err := f.svc.PaymentFailed(ctx, id, pay); err != nil {
		t.Fatal(err)
	}
	want := Payment{Provider: "test", ID: pay.ID, Status: PaymentSucceeded, AmountCents: 700}
	if p := f.payment(t, user, id); p == nil || *p != want {
		t.Fatalf("payment %+v after a late failure report, want %+v", p, want)
	}
	if err := f.svc.PaymentRefunded(ctx, pay.ID, 300); err != nil {
		t.Fatal(err)
	}
	want.RefundedCents = 300
	if p := f.payment(t, user, id); p == nil || *p != want {
		t.Fatalf("payment %+v after a partial refund, want %+v", p, want)
	}
	if err := f.svc.PaymentRefunded(ctx, pay.ID, 700); err != nil {
		t.Fatal(err)
	}
	want.RefundedCents, want.Status = 700, PaymentRefunded
	if p := f.payment(t, user, id); p == nil || *p != want {
		t.Fatalf("payment %+v after a full refund, want %+v", p, want)
	}
	if cents, n := provider.Charged(id); cents != 700 || n != 1 {
		t.Fatalf("charged %d in %d", cents, n)
	}
}

// A failed payment leaves the order payable; the next card pays it, and
// the order shows the payment it was paid with.
func TestFailedPaymentLeavesTheOrderPayable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withProvider(slowProvider{NewTestProvider()})
	f.sale(t, "again", 1, 0, 100)
	user := f.user(t)
	ctx := context.Background()
	id := f.place(t, user, "again", 1).OrderID
	f.writeAll(t)
	first, err := f.svc.Pay(ctx, user, id, threeDSToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.PaymentFailed(ctx, id, *first.Payment); err != nil {
		t.Fatal(err)
	}
	if p := f.payment(t, user, id); p.Status != PaymentFailed || p.ClientSecret != "" {
		t.Fatalf("payment %+v, want failed", p)
	}
	paid, err := f.svc.Pay(ctx, user, id, "tok_ok")
	if err != nil || paid.Status != StatusPaid {
		t.Fatalf("pay after a failure: %+v %v", paid, err)
	}
	if p := f.payment(t, user, id); p.Status != PaymentSucceeded || p.ID == first.Payment.ID {
		t.Fatalf("order shows %+v, want the payment that paid it", p)
	}
}

// A success report that cannot pay its order is refunded, never applied:
// the wrong amount, an order no longer payable, one this shop never had.
func TestSuccessThatCannotPayIsRefunded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	provider := NewTestProvider()
	f.withProvider(provider)
	f.sale(t, "ref", 3, 0, 100)
	user := f.user(t)
	ctx := context.Background()
	wrong := f.place(t, user, "ref", 1).OrderID
	cancelled := f.place(t, user, "ref", 1).OrderID
	f.writeAll(t)
	if _, err := f.svc.Cancel(ctx, user, cancelled); err != nil {
		t.Fatal(err)
	}
	charge := func(id string, cents int64) Payment {
		p, err := provider.Charge(ctx, Charge{Key: id, OrderID: id, AmountCents: cents, Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := uuid.NewString()
	for _, c := range []struct {
		name, id string
		pay      Payment
	}{
		{"wrong amount", wrong, charge(wrong, 99)},
		{"cancelled", cancelled, charge(cancelled, 100)},
		{"unknown order", unknown, charge(unknown, 100)},
	} {
		got, err := f.svc.PaymentSucceeded(ctx, c.id, c.pay)
		if err != nil || got != SettledRefunded {
			t.Errorf("%s: %s %v, want refunded", c.name, got, err)
		}
		if cents, _ := provider.Charged(c.id); cents != 0 {
			t.Errorf("%s: %d cents kept", c.name, cents)
		}
		if again, err := f.svc.PaymentSucceeded(ctx, c.id, c.pay); err != nil || again != SettledUnchanged {
			t.Errorf("%s again: %s %v, want unchanged", c.name, again, err)
		}
	}
	if st := f.status(t, wrong); st != StatusConfirmed {
		t.Fatalf("order paid with the wrong amount is %s", st)
	}
	if p := f.payment(t, user, cancelled); p == nil || p.Status != PaymentRefunded || p.RefundedCents != 100 {
		t.Fatalf("cancelled order's payment %+v, want refunded", p)
	}
	if got, err := f.svc.PaymentSucceeded(ctx, "not-an-order", Payment{ID: "pi_x", AmountCents: 1}); err != nil || got != SettledUnchanged {
		t.Fatalf("an intent not of ours: %s %v", got, err)
	}
}

// A payment's success report (twice, as a provider may deliver it),
// a cancel and the sweeper, released together at the payment deadline:
// each order ends in exactly one of paid, cancelled and expired; a paid
// one keeps one charge, every other is refunded, and the units of every
// order not paid are back in stock once.
func TestSuccessReportRacesCancelAndExpiry(t *testing.T) {
	t.Parallel()
	const n = 24
	f, provider, ids, users := newDue(t, 3*time.Second, "tri", n)
	ctx := context.Background()
	pays := make([]Payment, n)
	for i, id := range ids {
		p, err := provider.Charge(ctx, Charge{Key: id, OrderID: id, AmountCents: 100, Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		pays[i] = p
	}
	var reportedPaid, cancelled atomic.Int64
	sw := f.sweeper(SweeperOptions{Batch: 2})
	var expired atomic.Int64
	report := func(i int) {
		got, err := f.svc.PaymentSucceeded(ctx, ids[i], pays[i])
		switch {
		case err != nil:
			t.Errorf("report %d: %v", i, err)
		case got == SettledPaid:
			reportedPaid.Add(1)
		}
	}
	cancel := func(i int) {
		if _, err := f.svc.Cancel(ctx, users[i], ids[i]); err == nil {
			cancelled.Add(1)
		} else if !errors.Is(err, ErrNotCancellable) {
			t.Errorf("cancel: %v", err)
		}
	}
	sweep := func() { sweepCounting(t, sw, &expired) }
	after := func(d time.Duration, op func()) func() { return func() { time.Sleep(d); op() } }
	// Released together just before the deadline: a third of the orders
	// with their reports ahead of the cancel (a report makes a few calls to
	// PostgreSQL before its Redis step, and 48 reports share the pool), a third the other
	// way round, and a third at the deadline itself, where the sweeper
	// joins; every order's two reports race each other.
	o, _, _ := f.svc.life.read(ctx, ids[0])
	time.Sleep(time.Until(o.ExpiresAt.Add(-100 * time.Millisecond)))
	var ops []func()
	for i := range ids {
		switch i % 3 {
		case 0:
			ops = append(ops, func() { report(i) }, func() { report(i) }, after(60*time.Millisecond, func() { cancel(i) }))
		case 1:
			ops = append(ops, func() { cancel(i) }, after(time.Millisecond, func() { report(i) }), func() { report(i) })
		default:
			wait := 110 * time.Millisecond
			ops = append(ops, after(wait, func() { report(i) }), after(wait, func() { report(i) }),
				after(wait, func() { cancel(i) }), after(wait, sweep))
		}
	}
	ordertesting.Together(ops...)
	f.waitUntilDue(t, ids[n-1])
	sweep()

	count := map[string]int64{}
	for i, id := range ids {
		st := f.status(t, id)
		count[st]++
		p := f.payment(t, users[i], id)
		cents, charges := provider.Charged(id)
		switch {
		case st == StatusPaid && (cents != 100 || charges != 1 || p.Status != PaymentSucceeded):
			t.Errorf("paid order %s: charged %d in %d, payment %+v", id, cents, charges, p)
		case st != StatusPaid && (cents != 0 || p.Status != PaymentRefunded || p.RefundedCents != 100):
			t.Errorf("%s order %s: charged %d, payment %+v; want refunded", st, id, cents, p)
		case st != StatusPaid && st != StatusCancelled && st != StatusExpired:
			t.Errorf("order %s ended %s", id, st)
		}
	}
	// A report that comes after the window closed expires the order on the
	// spot (payStep's "late"), as the sweeper would a moment later: its
	// answer is a refund, so the service's own count of expiries says how
	// many it made.
	byReports := int64(testutil.ToFloat64(f.svc.metrics.transitions.WithLabelValues(StatusExpired)))
	if count[StatusPaid] != reportedPaid.Load() || count[StatusCancelled] != cancelled.Load() ||
		count[StatusExpired] != expired.Load()+byReports {
		t.Fatalf("ended %v; answered paid %d, cancelled %d, expired %d by the sweeper and %d by late reports",
			count, reportedPaid.Load(), cancelled.Load(), expired.Load(), byReports)
	}
	if a := f.available(t, "tri"); a != n-count[StatusPaid] {
		t.Fatalf("available %d, want the %d units of the orders not paid", a, n-count[StatusPaid])
	}
	f.writeAll(t)
	if c := f.count(t, `SELECT count(*) FROM order_transitions`); c != n {
		t.Fatalf("%d transitions recorded, want %d", c, n)
	}
	t.Logf("paid %d, cancelled %d, expired %d", count[StatusPaid], count[StatusCancelled], count[StatusExpired])
}

// The synchronous pay and its provider's report of the same payment at
// once: paid once, charged once, nothing refunded.
func TestPayAndItsReportAtOnce(t *testing.T) {
	t.Parallel()
	const n = 16
	f, provider, ids, users := newDue(t, time.Hour, "both", n)
	ctx := context.Background()
	var ops []func()
	for i, id := range ids {
		// The payment Pay will make: the provider answers a key once.
		p, err := provider.Charge(ctx, Charge{Key: chargeKey(id, "tok_ok"), OrderID: id, AmountCents: 100, Token: "tok_ok"})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, func() {
			if o, err := f.svc.Pay(ctx, users[i], id, "tok_ok"); err != nil || o.Status != StatusPaid {
				t.Errorf("pay: %+v %v", o, err)
			}
		}, func() {
			if _, err := f.svc.PaymentSucceeded(ctx, id, p); err != nil {
				t.Errorf("report: %v", err)
			}
		})
	}
	ordertesting.Together(ops...)
	for _, id := range ids {
		if st := f.status(t, id); st != StatusPaid {
			t.Errorf("order %s is %s", id, st)
		}
		if cents, c := provider.Charged(id); cents != 100 || c != 1 {
			t.Errorf("order %s charged %d in %d", id, cents, c)
		}
	}
	if r := provider.Refunds(); r != 0 {
		t.Fatalf("%d refunds", r)
	}
	f.writeAll(t)
	if c := f.count(t, `SELECT count(*) FROM order_transitions WHERE status = 'paid'`); c != n {
		t.Fatalf("%d paid transitions recorded, want %d", c, n)
	}
}
