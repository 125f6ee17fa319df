package order

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// Many refunds of one paid order, released together with cancels and
// expiries of the round's other orders: the order is refunded once (one
// provider refund, one release), every refund answers it refunded, and
// every unit of the round is back exactly once, in available, released
// and the buyers' counts.
func TestRefundRacesItselfAndOtherReleases(t *testing.T) {
	t.Parallel()
	const n, refunds, cancels = 10, 16, 4
	f, provider, ids, users := newDue(t, 4*time.Second, "rf", n)
	f.svc = New(f.db.Pool, f.r.Client, f.stock, f.svc.exists, f.r.Prefix, f.svc.log, prometheus.NewRegistry(),
		Options{PaymentTTL: 4 * time.Second, Payments: laggingRefunds{provider}})
	ctx := context.Background()
	if o, err := f.svc.Pay(ctx, users[0], ids[0], "tok_ok"); err != nil || o.Status != StatusPaid {
		t.Fatalf("pay = %+v %v", o, err)
	}
	sw := f.sweeper(SweeperOptions{Batch: 2})
	f.waitUntilDue(t, ids[1])
	var refunded, cancelled atomic.Int64
	var ops []func()
	for range refunds {
		ops = append(ops, func() {
			o, err := f.svc.Refund(ctx, ids[0])
			if err != nil || o.Status != StatusRefunded {
				t.Errorf("refund = %+v %v", o, err)
				return
			}
			refunded.Add(1)
		})
	}
	for i := 1; i <= cancels; i++ {
		ops = append(ops, func() {
			if _, err := f.svc.Cancel(ctx, users[i], ids[i]); err == nil {
				cancelled.Add(1)
			} else if !errors.Is(err, ErrNotCancellable) {
				t.Errorf("cancel: %v", err)
			}
		}, func() { sweepCounting(t, sw, new(atomic.Int64)) })
	}
	ordertesting.Together(ops...)
	for range 2 { // whatever the racing sweeps left due
		sweepCounting(t, sw, new(atomic.Int64))
	}
	f.wantAllBack(t, "rf", n)
	if got, calls := refunded.Load(), provider.Refunds(); got != refunds || calls != 1 {
		t.Fatalf("%d of %d refunds answered refunded; %d provider refunds, want 1", got, refunds, calls)
	}
	if cents, _ := provider.Charged(ids[0]); cents != 0 {
		t.Fatalf("%d cents still charged after the refund", cents)
	}
	f.writeAll(t)
	if k := f.count(t, `SELECT count(*) FROM order_transitions WHERE order_id = $1 AND status = 'refunded'
	    AND refunded_at IS NOT NULL AND at < refunded_at`, ids[0]); k != 1 {
		t.Fatalf("refund recorded %d times (with the payment's time kept)", k)
	}
}

// laggingRefunds is the test provider taking its time over a refund, as a
// real one's round trip does: the window in which a second refund of the
// order could ask it again.
type laggingRefunds struct{ *TestProvider }

func (p laggingRefunds) Refund(ctx context.Context, id string) error {
	time.Sleep(100 * time.Millisecond)
	return p.TestProvider.Refund(ctx, id)
}

// wantAllBack checks that every unit of sku's round of n is back exactly
// once: in available, in released, and off every buyer's count.
func (f *fixture) wantAllBack(t *testing.T, sku string, n int64) {
	t.Helper()
	live, _, err := f.stock.Live(context.Background(), sku)
	if err != nil || live.Available != n || live.Released != n {
		t.Fatalf("available %d released %d (%v), want %d each: every unit back exactly once", live.Available, live.Released, err, n)
	}
	if counts := f.r.Client.HGetAll(context.Background(), f.stock.BuyersKey(sku)).Val(); len(counts) != 0 {
		t.Fatalf("buyer counts left %v, want none", counts)
	}
}
