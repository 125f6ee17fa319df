package order

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// withPaymentTTL rebuilds the fixture's service with a payment window and
// a test provider the test can inspect.
func (f *fixture) withPaymentTTL(d time.Duration) *TestProvider {
	p := NewTestProvider()
	f.svc = New(f.db.Pool, f.r.Client, f.stock, f.svc.exists, f.r.Prefix, f.svc.log, prometheus.NewRegistry(),
		Options{PaymentTTL: d, Payments: p})
	return p
}

func (f *fixture) sweeper(o SweeperOptions) Sweeper {
	return NewSweeper(f.r.Client, f.stock, f.r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), o)
}

// writeAll runs a writer until everything placed so far is written.
func (f *fixture) writeAll(t *testing.T) {
	t.Helper()
	w := start(f.writer("w", WriterOptions{}))
	f.drained(t)
	w.Stop(t)
}

func (f *fixture) available(t *testing.T, sku string) int64 {
	t.Helper()
	return ordertesting.Available(t, f.stock, sku)
}

func (f *fixture) status(t *testing.T, id string) string {
	t.Helper()
	return f.r.Client.HGet(context.Background(), f.svc.keys.Status(id), "status").Val()
}

func TestPayNeedsThePersistedOrderAndChargesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	provider := f.withPaymentTTL(time.Hour)
	f.sale(t, "p", 5, 0, 250)
	user := f.user(t)
	ctx := context.Background()
	p := f.place(t, user, "p", 2)

	if _, err := f.svc.Pay(ctx, user, p.OrderID, "tok_ok"); !errors.Is(err, ErrOrderPending) {
		t.Fatalf("pay of a pending order: %v, want order_pending", err)
	}
	f.writeAll(t)
	if _, err := f.svc.Pay(ctx, user, p.OrderID, DeclinedToken); !errors.Is(err, ErrDeclined) {
		t.Fatalf("declined token: %v", err)
	}
	if _, err := f.svc.Pay(ctx, f.user(t), p.OrderID, "tok_ok"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another user's pay: %v, want not found", err)
	}
	paid, err := f.svc.Pay(ctx, user, p.OrderID, "tok_ok")
	if err != nil || paid.Status != StatusPaid || paid.PaidAt == nil || paid.ExpiresAt == nil {
		t.Fatalf("pay = %+v %v", paid, err)
	}
	for _, tok := range []string{"tok_ok", "tok_other"} {
		again, err := f.svc.Pay(ctx, user, p.OrderID, tok)
		if err != nil || again.Status != StatusPaid || !again.PaidAt.Equal(*paid.PaidAt) {
			t.Fatalf("pay again with %s = %+v %v, want the same answer", tok, again, err)
		}
	}
	if cents, n := provider.Charged(p.OrderID); cents != 500 || n != 1 {
		t.Fatalf("charged %d cents in %d charges, want 500 in 1", cents, n)
	}
	if _, err := f.svc.Cancel(ctx, user, p.OrderID); !errors.Is(err, ErrNotCancellable) {
		t.Fatalf("cancel of a paid order: %v", err)
	}
	if n := f.r.Client.ZCard(ctx, f.svc.keys.Due(0)).Val(); n != 0 {
		t.Fatalf("a paid order is still due (%d)", n)
	}
	f.writeAll(t)
	if n := f.count(t, `SELECT count(*) FROM order_transitions WHERE order_id = $1 AND status = 'paid'`, p.OrderID); n != 1 {
		t.Fatalf("paid recorded %d times", n)
	}
	got, err := f.svc.Get(ctx, user, p.OrderID)
	if err != nil || got.Status != StatusPaid {
		t.Fatalf("get = %+v %v", got, err)
	}
}

// A pending order cancelled before the writer gets to it keeps its state:
// the writer persists the row and the transition, and confirms nothing.
func TestCancelGivesUnitsBackOnceAndTheWriterRecordsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withPaymentTTL(time.Hour)
	round := f.sale(t, "c", 3, 1, 100)
	user := f.user(t)
	ctx := context.Background()
	p := f.place(t, user, "c", 1)

	for range 2 {
		o, err := f.svc.Cancel(ctx, user, p.OrderID)
		if err != nil || o.Status != StatusCancelled {
			t.Fatalf("cancel = %+v %v", o, err)
		}
	}
	if a := f.available(t, "c"); a != 3 {
		t.Fatalf("available %d after the cancel, want 3", a)
	}
	f.place(t, user, "c", 1) // the per-user count went back too
	if _, err := f.svc.Pay(ctx, user, p.OrderID, "tok_ok"); !errors.Is(err, ErrNotPayable) {
		t.Fatalf("pay of a cancelled order: %v", err)
	}
	f.writeAll(t)
	if st := f.status(t, p.OrderID); st != StatusCancelled {
		t.Fatalf("status after the writer = %q, want cancelled", st)
	}
	if n := f.count(t, `SELECT count(*) FROM order_transitions WHERE order_id = $1 AND status = 'cancelled'`, p.OrderID); n != 1 {
		t.Fatalf("cancel recorded %d times", n)
	}
	if sold := f.sold(t, round); sold != 2 {
		t.Fatalf("sold %d, want the 2 units of both persisted orders", sold)
	}
	f.r.Client.Del(ctx, f.svc.keys.Status(p.OrderID)) // forgotten by Redis
	got, err := f.svc.Get(ctx, user, p.OrderID)
	if err != nil || got.Status != StatusCancelled {
		t.Fatalf("get from PostgreSQL = %+v %v", got, err)
	}
	if _, err := f.svc.Cancel(ctx, user, p.OrderID); err != nil {
		t.Fatalf("cancel of a cancelled order Redis forgot: %v", err)
	}
}

// Units given back are sold again: PostgreSQL's sold (every persisted
// order's units) passes quantity by what came back, within the CHECK.
func TestResoldUnitsPassTheSoldCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withPaymentTTL(time.Hour)
	round := f.sale(t, "r", 2, 0, 100)
	ctx := context.Background()
	var first []Placed
	for range 2 {
		u := f.user(t)
		first = append(first, f.place(t, u, "r", 1))
		if _, err := f.svc.Cancel(ctx, u, first[len(first)-1].OrderID); err != nil {
			t.Fatal(err)
		}
	}
	f.place(t, f.user(t), "r", 1)
	f.place(t, f.user(t), "r", 1)
	f.writeAll(t)
	if n := f.count(t, `SELECT count(*) FROM orders`); n != 4 {
		t.Fatalf("%d orders written, want 4", n)
	}
	if dead := f.r.Client.XLen(ctx, f.svc.keys.Dead(0)).Val(); dead != 0 {
		t.Fatalf("%d dead letters", dead)
	}
	if sold := f.sold(t, round); sold != 4 {
		t.Fatalf("sold %d, want 4", sold)
	}
}

// dueOrders places n confirmed orders of one unit each, due after ttl.
func dueOrders(t *testing.T, f *fixture, sku string, n int) (ids, users []string) {
	t.Helper()
	for range n {
		u := f.user(t)
		ids = append(ids, f.place(t, u, sku, 1).OrderID)
		users = append(users, u)
	}
	f.writeAll(t)
	return ids, users
}

// newDue is a fixture with a payment window of d (its provider returned)
// and n written one-unit orders, each of its own buyer, of a round of n
// units of sku at 100 cents.
func newDue(t *testing.T, d time.Duration, sku string, n int) (f *fixture, provider *TestProvider, ids, users []string) {
	t.Helper()
	f = newFixture(t)
	provider = f.withPaymentTTL(d)
	f.sale(t, sku, n, 0, 100)
	ids, users = dueOrders(t, f, sku, n)
	return f, provider, ids, users
}

// waitUntil sleeps until the order's payment window closes.
func (f *fixture) waitUntilDue(t *testing.T, id string) {
	t.Helper()
	o, found, err := f.svc.life.read(context.Background(), id)
	if err != nil || !found || o.ExpiresAt == nil {
		t.Fatalf("order %s: %+v %v", id, o, err)
	}
	time.Sleep(time.Until(*o.ExpiresAt))
}

// Pay races expiry at the deadline: each order ends paid or expired, never
// both, and only the paid ones stay charged and keep their units.
func TestPayRacesExpiry(t *testing.T) {
	t.Parallel()
	const n = 20
	f, provider, ids, users := newDue(t, 3*time.Second, "race", n)
	var paid atomic.Int64
	sw, _ := f.raceSweeps(t, ids, SweeperOptions{Batch: 3}, func(i int) {
		if o, err := f.svc.Pay(context.Background(), users[i], ids[i], "tok_ok"); err == nil && o.Status == StatusPaid {
			paid.Add(1)
		} else if err != nil && !errors.Is(err, ErrNotPayable) {
			t.Errorf("pay: %v", err)
		}
	})
	if _, err := sw.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nPaid, nExpired int64
	for _, id := range ids {
		switch st := f.status(t, id); st {
		case StatusPaid:
			nPaid++
			if cents, c := provider.Charged(id); cents != 100 || c != 1 {
				t.Errorf("paid order %s charged %d in %d", id, cents, c)
			}
		case StatusExpired:
			nExpired++
			if cents, _ := provider.Charged(id); cents != 0 {
				t.Errorf("expired order %s kept a charge of %d", id, cents)
			}
		default:
			t.Errorf("order %s ended %q", id, st)
		}
	}
	if nPaid != paid.Load() || nPaid+nExpired != n {
		t.Fatalf("paid %d (answered %d), expired %d of %d", nPaid, paid.Load(), nExpired, n)
	}
	if a := f.available(t, "race"); a != nExpired {
		t.Fatalf("available %d, want the %d expired units back", a, nExpired)
	}
	t.Logf("paid %d, expired %d", nPaid, nExpired)
}

// Cancel races expiry: each order is given back once.
func TestCancelRacesExpiry(t *testing.T) {
	t.Parallel()
	const n = 20
	f, _, ids, users := newDue(t, 3*time.Second, "cx", n)
	var cancelled atomic.Int64
	_, expired := f.raceSweeps(t, ids, SweeperOptions{Batch: 2}, func(i int) {
		_, err := f.svc.Cancel(context.Background(), users[i], ids[i])
		if err == nil {
			cancelled.Add(1)
		} else if !errors.Is(err, ErrNotCancellable) {
			t.Errorf("cancel: %v", err)
		}
	})
	var nCancelled int64
	for _, id := range ids {
		switch st := f.status(t, id); st {
		case StatusCancelled:
			nCancelled++
		case StatusExpired:
		default:
			t.Errorf("order %s ended %q", id, st)
		}
	}
	// Exactly one step won each order, and its answer says so.
	if cancelled.Load() != nCancelled || cancelled.Load()+expired != n {
		t.Fatalf("%d cancels and %d expiries answered success, %d orders ended cancelled, of %d",
			cancelled.Load(), expired, nCancelled, n)
	}
	live, _, _ := f.stock.Live(context.Background(), "cx")
	if live.Available != n || live.Released != n {
		t.Fatalf("available %d released %d, want %d each: every unit back exactly once", live.Available, live.Released, n)
	}
}

// raceSweeps makes a sweeper of o and, once the first of ids is due, runs
// op(i) for every order i, each alongside a sweep, all from one start; it
// waits for them and returns the sweeper and the orders its sweeps
// expired.
func (f *fixture) raceSweeps(t *testing.T, ids []string, o SweeperOptions, op func(i int)) (Sweeper, int64) {
	sw := f.sweeper(o)
	f.waitUntilDue(t, ids[0])
	var expired atomic.Int64
	var ops []func()
	for i := range ids {
		ops = append(ops, func() { op(i) }, func() { sweepCounting(t, sw, &expired) })
	}
	ordertesting.Together(ops...)
	return sw, expired.Load()
}

// sweepCounting sweeps once with sw and adds the orders it expired to
// expired.
func sweepCounting(t *testing.T, sw Sweeper, expired *atomic.Int64) {
	k, err := sw.Sweep(context.Background())
	if err != nil {
		t.Errorf("sweep: %v", err)
	}
	expired.Add(int64(k))
}

// Two sweepers at once, without the lock, expire each order once.
func TestTwoSweepersReleaseEachOrderOnce(t *testing.T) {
	t.Parallel()
	const n = 60
	f, _, ids, _ := newDue(t, 2*time.Second, "two", n)
	f.waitUntilDue(t, ids[n-1])

	sweepers := []Sweeper{f.sweeper(SweeperOptions{Batch: 5}), f.sweeper(SweeperOptions{Batch: 5})}
	var expired atomic.Int64
	ordertesting.Together(func() { sweepCounting(t, sweepers[0], &expired) }, func() { sweepCounting(t, sweepers[1], &expired) })
	live, _, _ := f.stock.Live(context.Background(), "two")
	if expired.Load() != n || live.Available != n || live.Released != n {
		t.Fatalf("expired %d, available %d, released %d; want %d each", expired.Load(), live.Available, live.Released, n)
	}
	f.writeAll(t)
	if c := f.count(t, `SELECT count(*) FROM order_transitions WHERE status = 'expired'`); c != n {
		t.Fatalf("%d expiries recorded, want %d", c, n)
	}
}

// A sweeper that dies right after its claim leaves the orders to the next
// sweep once the lease is over; they expire once.
func TestSweeperCrashAfterClaimIsRepaired(t *testing.T) {
	t.Parallel()
	f, _, ids, _ := newDue(t, 2*time.Second, "crash", 4)
	f.waitUntilDue(t, ids[3])

	dying := f.sweeper(SweeperOptions{Lease: time.Second})
	dying.InjectClaimFault(crashOnce())
	if _, err := dying.Sweep(context.Background()); err == nil {
		t.Fatal("the fault did not stop the sweep")
	}
	next := f.sweeper(SweeperOptions{})
	if k, err := next.Sweep(context.Background()); err != nil || k != 0 {
		t.Fatalf("sweep during the lease expired %d (%v), want none", k, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if k, err := next.Sweep(context.Background()); err != nil || k != 4 {
		t.Fatalf("sweep after the lease expired %d (%v), want 4", k, err)
	}
	if a := f.available(t, "crash"); a != 4 {
		t.Fatalf("available %d, want 4", a)
	}
}

// An order paid before its sweep (its due entry put back, as a lost ZREM
// would leave it) is not expired: the release is guarded by the status.
func TestSweeperLeavesAPaidOrder(t *testing.T) {
	t.Parallel()
	f, _, ids, users := newDue(t, time.Hour, "pd", 1)
	if _, err := f.svc.Pay(context.Background(), users[0], ids[0], "tok_ok"); err != nil {
		t.Fatal(err)
	}
	f.r.Client.ZAdd(context.Background(), f.svc.keys.Due(0), redis.Z{Score: 1, Member: ids[0]})
	if k, err := f.sweeper(SweeperOptions{}).Sweep(context.Background()); err != nil || k != 0 {
		t.Fatalf("sweep expired %d (%v), want 0", k, err)
	}
	if st, a := f.status(t, ids[0]), f.available(t, "pd"); st != StatusPaid || a != 0 {
		t.Fatalf("status %q, available %d; want paid, 0", st, a)
	}
	if n := f.r.Client.ZCard(context.Background(), f.svc.keys.Due(0)).Val(); n != 0 {
		t.Fatalf("the paid order is still due")
	}
}

// With no payment window, orders are never due.
func TestNoPaymentWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withPaymentTTL(0)
	f.sale(t, "nw", 2, 0, 100)
	user := f.user(t)
	p := f.place(t, user, "nw", 1)
	f.writeAll(t)
	o, err := f.svc.Get(context.Background(), user, p.OrderID)
	if err != nil || o.ExpiresAt != nil || o.Status != StatusConfirmed {
		t.Fatalf("get = %+v %v, want confirmed without expires_at", o, err)
	}
	if n := f.r.Client.ZCard(context.Background(), f.svc.keys.Due(0)).Val(); n != 0 {
		t.Fatalf("%d orders due without a window", n)
	}
	if c := f.count(t, `SELECT count(*) FROM orders WHERE expires_at IS NULL`); c != 1 {
		t.Fatalf("expires_at recorded for %d orders", 1-c)
	}
}

// An order placed, and written, after a payment, a cancellation or a read
// found no Redis status for it, but before that step asked PostgreSQL, is
// live: the step goes by its status, rather than refusing it as an order
// Redis has forgotten (or answering the row, behind it).
func TestOrderPlacedBetweenTheTwoReadsIsLive(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"pay", "cancel", "get"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.withPaymentTTL(time.Hour)
			f.sale(t, "p", 5, 0, 100)
			user, id := f.user(t), uuid.NewString()
			ctx := context.Background()
			var once sync.Once
			f.svc.betweenReads = func() {
				once.Do(func() {
					if _, err := f.svc.reserve(ctx, enqueue{orderID: id, userID: user}, []Line{{SKU: "p", Quantity: 2}}); err != nil {
						t.Errorf("reserve: %v", err)
					}
					f.writeAll(t)
					if step == "get" {
						// Paid since: PostgreSQL's row is behind.
						if _, err := f.svc.Pay(ctx, user, id, "tok_ok"); err != nil {
							t.Errorf("pay: %v", err)
						}
					}
				})
			}
			var (
				o    Order
				err  error
				want = StatusPaid
			)
			switch step {
			case "pay":
				o, err = f.svc.Pay(ctx, user, id, "tok_ok")
			case "cancel":
				o, err = f.svc.Cancel(ctx, user, id)
				want = StatusCancelled
			case "get":
				o, err = f.svc.Get(ctx, user, id)
			}
			if err != nil || o.Status != want {
				t.Fatalf("%s = %q %v, want %s", step, o.Status, err, want)
			}
			if got := f.status(t, id); got != want {
				t.Fatalf("status in Redis %q, want %s", got, want)
			}
		})
	}
}

// An order the writer persists and confirms while the buyer's list is
// being read is on the page once: not in neither source (PostgreSQL read
// before its commit, the pending index after its confirmation).
func TestOrderConfirmedWhileListedIsListedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.sale(t, "p", 5, 0, 100)
	user := f.user(t)
	p := f.place(t, user, "p", 1)
	var once sync.Once
	f.svc.betweenReads = func() { once.Do(func() { f.writeAll(t) }) }
	page, err := f.svc.List(context.Background(), user, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ID != p.OrderID {
		t.Fatalf("listed %+v, want order %s once", page.Items, p.OrderID)
	}
	if got := f.status(t, p.OrderID); got != StatusConfirmed {
		t.Fatalf("status %q: the writer did not confirm it between the reads", got)
	}
}

// While the saga repair decides an order whose status a failover lost (its
// tombstone marked deciding, PostgreSQL about to be asked), a payment or a
// cancellation of it waits (503) rather than refusing a written order as
// one Redis has forgotten; a read or a list answers PostgreSQL's row.
func TestOrderBeingDecidedIsNotRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withPaymentTTL(time.Hour)
	f.sale(t, "p", 5, 0, 100)
	user := f.user(t)
	p := f.place(t, user, "p", 1)
	f.writeAll(t)
	ctx := context.Background()
	written, err := f.svc.Get(ctx, user, p.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	key := f.svc.keys.Status(p.OrderID)
	if err := f.r.Client.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	// Still in the buyer's pending index too, as after a failover that
	// lost the confirmation: the list meets the mark there as well.
	if err := f.r.Client.ZAdd(ctx, f.svc.keys.Pending(user), redis.Z{Score: float64(written.CreatedAt.UnixMilli()), Member: p.OrderID}).Err(); err != nil {
		t.Fatal(err)
	}
	// The tombstone marked deciding, as the saga repair's abort script
	// leaves it (internal/order/saga).
	if err := f.r.Client.HSet(ctx, key, "status", StatusAborted, "deciding", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.r.Client.PExpire(ctx, key, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Pay(ctx, user, p.OrderID, "tok_ok"); !errors.Is(err, errDeciding) {
		t.Fatalf("pay while deciding: %v, want %v", err, errDeciding)
	}
	if _, err := f.svc.Cancel(ctx, user, p.OrderID); !errors.Is(err, errDeciding) {
		t.Fatalf("cancel while deciding: %v, want %v", err, errDeciding)
	}
	if o, err := f.svc.Get(ctx, user, p.OrderID); err != nil || o.Status != StatusConfirmed {
		t.Fatalf("get while deciding = %q %v, want PostgreSQL's confirmed", o.Status, err)
	}
	if page, err := f.svc.List(ctx, user, 10, ""); err != nil || len(page.Items) != 1 || page.Items[0].Status != StatusConfirmed {
		t.Fatalf("list while deciding = %+v %v, want the order as PostgreSQL has it, confirmed", page.Items, err)
	}
}
