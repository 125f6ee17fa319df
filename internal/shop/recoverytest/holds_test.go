package recoverytest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/saga"
	"github.com/shop-oss/shop/internal/order/sweeper"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/recovery"
)

// sagaShop is clusterShop's sale with the order package's own checkout
// (the saga, for an order spanning partitions) and its writer. stopAt
// arms the saga's fault hook: the next placement to reach the point waits
// there until resumed, with what it did so far standing.
type sagaShop struct {
	*clusterShop
	orders  *order.Service
	armed   atomic.Pointer[saga.Point]
	stopped chan struct{}
	resume  chan struct{}
}

func newSagaShop(t *testing.T, holdLifetime time.Duration) *sagaShop {
	t.Helper()
	s := &sagaShop{clusterShop: newClusterShop(t), stopped: make(chan struct{}), resume: make(chan struct{})}
	placer := saga.New(saga.Options{HoldLifetime: holdLifetime})
	s.orders = s.Orders(order.Options{Placer: placer.On})
	placer.InjectFault(func(p saga.Point) {
		if at := s.armed.Load(); at != nil && *at == p && s.armed.CompareAndSwap(at, nil) {
			s.stopped <- struct{}{}
			<-s.resume
		}
	})
	return s
}

// stopAt places lines for user in the background, stopping the saga at
// point; it returns once the saga waits there, and the placement's answer
// arrives on the channel after resume is closed.
func (s *sagaShop) stopAt(t *testing.T, point saga.Point, user string, lines ...order.Line) <-chan error {
	t.Helper()
	s.armed.Store(&point)
	done := make(chan error, 1)
	go func() {
		_, err := s.orders.Place(context.Background(), user, lines, order.PlaceOptions{})
		done <- err
	}()
	select {
	case <-s.stopped:
		return done
	case err := <-done:
		t.Fatalf("the placement ended before %s: %v", point, err)
		return nil
	}
}

// stoppedCheckout has a new buyer check out a unit of SKUs[0][0] (home,
// in partition 0) and 2 of SKUs[1][0] (foreign, held in partition 1),
// stopped at point as stopAt does.
func (s *sagaShop) stoppedCheckout(t *testing.T, point saga.Point) (home, foreign, user string, done <-chan error) {
	t.Helper()
	home, foreign = s.SKUs[0][0], s.SKUs[1][0]
	user = s.User(t)
	return home, foreign, user, s.stopAt(t, point, user, order.Line{SKU: home, Quantity: 1}, order.Line{SKU: foreign, Quantity: 2})
}

// newBusySagaShop is a sagaShop with its writer running and the others'
// orders placed: where most hold tests stop their own checkout.
func newBusySagaShop(t *testing.T, holdLifetime time.Duration) *sagaShop {
	t.Helper()
	s := newSagaShop(t, holdLifetime)
	s.writer(t)
	s.others(t)
	return s
}

// others places committed cross-shard orders of another buyer in every
// partition, so that the rounds recover rebuilds are not empty.
func (s *sagaShop) others(t *testing.T) {
	t.Helper()
	u := s.User(t)
	for p := range s.SKUs {
		if _, err := s.orders.Place(context.Background(), u, []order.Line{{SKU: s.SKUs[p][1], Quantity: 1},
			{SKU: s.SKUs[(p+2)%6][1], Quantity: 2}}, order.PlaceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// writer runs the order writer until the test ends.
func (s *sagaShop) writer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := writer.New(s.DB.Pool, s.RDB, s.Prefix, s.Log, prometheus.NewRegistry(),
		writer.Options{Consumer: "w", Partitions: s.Parts, Block: 20 * time.Millisecond})
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("writer: %v", err)
		}
	})
}

// exact checks, once every order is written, that every SKU's live stock
// adds up with PostgreSQL's orders: available + sold == seeded, and each
// buyer's count is the units of their orders not cancelled or expired;
// and that the audit is clean.
func (s *sagaShop) exact(t *testing.T) {
	t.Helper()
	s.Drained(t)
	ctx := context.Background()
	for _, sku := range s.allSKUs() {
		lr, ok, err := s.Stock.Live(ctx, sku)
		if err != nil || !ok {
			t.Fatalf("%s: live %v %v", sku, ok, err)
		}
		rows, err := s.DB.Pool.Query(ctx, `SELECT o.user_id::text, sum(i.quantity)
			FROM order_items i JOIN orders o ON o.id = i.order_id LEFT JOIN order_transitions t ON t.order_id = o.id
			WHERE i.sku = $1 AND i.round_id = $2 AND (t.status IS NULL OR t.status NOT IN ('cancelled', 'expired'))
			GROUP BY o.user_id`, sku, lr.Round)
		if err != nil {
			t.Fatal(err)
		}
		want, sold := map[string]string{}, int64(0)
		for rows.Next() {
			var u string
			var n int64
			if err := rows.Scan(&u, &n); err != nil {
				t.Fatal(err)
			}
			want[u], sold = strconv.FormatInt(n, 10), sold+n
		}
		rows.Close()
		got := s.RDB.HGetAll(ctx, s.Stock.BuyersKey(sku)).Val()
		if lr.Available+sold != s.units || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: available %d + sold %d != seeded %d, or buyer counts %v, want %v",
				sku, lr.Available, sold, s.units, got, want)
		}
	}
	if rep := s.audit(t, 0); !rep.OK {
		t.Fatalf("audit: %+v", rep.Problems)
	}
}

func (s *sagaShop) allSKUs() []string {
	var out []string
	for _, skus := range s.SKUs {
		out = append(out, skus...)
	}
	return out
}

// taken checks sku's live stock and user's count there right now.
func (s *sagaShop) taken(t *testing.T, sku, user string, available int64, count string) {
	t.Helper()
	ctx := context.Background()
	lr, _, err := s.Stock.Live(ctx, sku)
	got := s.RDB.HGet(ctx, s.Stock.BuyersKey(sku), user).Val()
	if err != nil || lr.Available != available || got != count {
		t.Fatalf("%s: available %d, buyer's count %q (%v); want %d and %q", sku, lr.Available, got, err, available, count)
	}
}

func round(rep recovery.Report, sku string) recovery.Round {
	for _, r := range rep.Rounds {
		if r.SKU == sku {
			return r
		}
	}
	return recovery.Round{}
}

// A cross-shard checkout (home partition 0, 2 units held in partition 1)
// stops after its hold, before its commit, and recover runs: the hold's
// units stay taken, and the buyer's count with them. Then the order
// commits: every round adds up exactly with PostgreSQL, the audit is
// clean, and recover again changes nothing.
func TestRecoverCountsAHoldThatCommitsAfterward(t *testing.T) {
	t.Parallel()
	s := newBusySagaShop(t, saga.DefaultHoldLifetime)
	home, foreign, u, done := s.stoppedCheckout(t, saga.AfterHold)

	rep := s.recover(t, nil)
	s.taken(t, foreign, u, s.units-2, "2")
	s.taken(t, home, u, s.units, "")
	if r := round(rep, foreign); r.HeldByHolds != 2 {
		t.Fatalf("round %+v: want 2 units held by the hold", r)
	}

	close(s.resume)
	if err := <-done; err != nil {
		t.Fatalf("the commit after recover: %v", err)
	}
	s.taken(t, foreign, u, s.units-2, "2")
	s.taken(t, home, u, s.units-1, "1")
	s.exact(t)
	for _, r := range s.recover(t, nil).Rounds {
		if r.Changed || r.HeldByHolds != 0 {
			t.Fatalf("recover again: %+v", r)
		}
	}
}

// The same checkout stops after its hold, recover runs, and the order
// never commits: past the hold's deadline the sweeper's repair gives the
// hold back, and the units come back once (not on top of a stock recover
// rebuilt without them); the late commit is refused. Every round adds up
// exactly, the audit is clean.
func TestRecoverCountsAHoldTheRepairGivesBack(t *testing.T) {
	t.Parallel()
	s := newBusySagaShop(t, 200*time.Millisecond)
	home, foreign, u, done := s.stoppedCheckout(t, saga.AfterHold)

	s.recover(t, nil)
	s.taken(t, foreign, u, s.units-2, "2")

	ctx := context.Background()
	sweeper := sweeper.New(s.RDB, s.Stock, s.Prefix, s.Log, prometheus.NewRegistry(),
		sweeper.Options{Sagas: saga.NewRepair(s.RDB, s.Stock, s.Prefix, s.Log,
			saga.RepairOptions{Persisted: ledger.PersistedIn(s.DB.Pool)})})
	holds := s.keys[1].Holds
	for deadline := time.Now().Add(30 * time.Second); s.RDB.ZCard(ctx, holds).Val() > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the hold was not repaired within 30s")
		}
		if _, err := sweeper.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.taken(t, foreign, u, s.units, "")

	close(s.resume)
	if err := <-done; err == nil {
		t.Fatal("the order committed after its saga was repaired")
	}
	s.taken(t, foreign, u, s.units, "")
	s.taken(t, home, u, s.units, "")
	s.exact(t)
}

// A checkout commits and is written to PostgreSQL, and its hold in
// partition 1 is not dropped yet when recover runs: its units are counted
// once (from PostgreSQL), not once more for the hold. Then the hold is
// dropped: every round adds up exactly, the audit is clean.
func TestRecoverCountsAHoldOfAPersistedOrderOnce(t *testing.T) {
	t.Parallel()
	s := newBusySagaShop(t, saga.DefaultHoldLifetime)
	home, foreign, u, done := s.stoppedCheckout(t, saga.AfterCommit)
	s.Drained(t)

	rep := s.recover(t, nil)
	s.taken(t, foreign, u, s.units-2, "2")
	s.taken(t, home, u, s.units-1, "1")
	if r := round(rep, foreign); r.HeldByHolds != 0 || r.Changed {
		t.Fatalf("round %+v: want nothing held by the hold alone, nothing changed", r)
	}

	close(s.resume)
	if err := <-done; err != nil {
		t.Fatalf("the placement: %v", err)
	}
	if n := s.RDB.ZCard(context.Background(), s.keys[1].Holds).Val(); n != 0 {
		t.Fatalf("%d holds left after the drop", n)
	}
	s.exact(t)
}

// The checkout stopped after its hold commits while recover runs, after
// recover read the holds (the hold standing) and before it reads the
// streams (the order's event there, the hold dropped; no writer runs, so
// PostgreSQL does not have it): its units are counted once, not missed,
// not twice. Every round adds up exactly, the audit is clean.
func TestRecoverCountsAHoldCommittedWhileItRuns(t *testing.T) {
	t.Parallel()
	s := newSagaShop(t, saga.DefaultHoldLifetime)
	s.others(t) // the writer starts after recover: only the stream has the order then
	home, foreign, u, done := s.stoppedCheckout(t, saga.AfterHold)

	rec := recovery.New(s.DB.Pool, s.RDB, s.Stock, s.Prefix, s.Log)
	var committed bool
	rec.InjectBetweenReads(func() {
		if committed {
			return
		}
		committed = true
		close(s.resume)
		if err := <-done; err != nil {
			t.Errorf("the commit while recover runs: %v", err)
		}
		if n := s.RDB.ZCard(context.Background(), s.keys[1].Holds).Val(); n != 0 {
			t.Errorf("%d holds left after the commit", n)
		}
	})
	rep, err := rec.Run(context.Background(), nil)
	if err != nil || !committed {
		t.Fatalf("recover: %v (committed meanwhile: %v)", err, committed)
	}
	if r := round(rep, foreign); r.HeldByHolds != 0 || r.Held != 2 {
		t.Fatalf("round %+v: want 2 units held, none by a hold alone", r)
	}
	s.taken(t, foreign, u, s.units-2, "2")
	s.taken(t, home, u, s.units-1, "1")
	s.writer(t)
	s.exact(t)
}
