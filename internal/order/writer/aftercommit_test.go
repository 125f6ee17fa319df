package writer

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/testenv"
)

// seen records what an after-commit hook was handed.
type seen struct {
	mu     sync.Mutex
	orders map[string]int // order id -> calls that carried it
	units  int
}

func newSeen() *seen { return &seen{orders: map[string]int{}} }

func (s *seen) hook(_ context.Context, orders []Persisted) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range orders {
		s.orders[o.ID]++
		for _, it := range o.Items {
			s.units += it.Quantity
		}
	}
	return nil
}

func (s *seen) check(t *testing.T, placed []order.Placed) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.orders) != len(placed) {
		t.Fatalf("the hook saw %d orders, want %d", len(s.orders), len(placed))
	}
	for _, p := range placed {
		if n := s.orders[p.OrderID]; n != 1 {
			t.Fatalf("order %s handed to the hook %d times, want once", p.OrderID, n)
		}
	}
}

// The hook sees every inserted order once, with its items, across
// concurrent loops of one writer.
func TestAfterCommitSeesEachInsertedOrderOnce(t *testing.T) {
	t.Parallel()
	f, _, u := newSale(t, 100)
	placed := f.placeN(t, u, "s", 40, 2)
	s := newSeen()
	f.drain(t, "w1", Options{Batch: 7, Concurrency: 3, AfterCommit: s.hook})
	s.check(t, placed)
	if s.units != 80 {
		t.Fatalf("the hook saw %d units, want 80", s.units)
	}
}

// A crash after COMMIT and the hook, before XACK: the entries are
// delivered again, insert nothing, and the hook is not called for them
// again.
func TestAfterCommitNotCalledForARedelivery(t *testing.T) {
	t.Parallel()
	f, _, u := newSale(t, 10)
	placed := f.placeN(t, u, "s", 5, 1)
	s := newSeen()
	f.crashAfterCommit(t, "w1", Options{AfterCommit: s.hook})
	if f.pendingCount(t) != 5 {
		t.Fatalf("pending %d, want the 5 entries unacknowledged", f.pendingCount(t))
	}
	f.drain(t, "w1", Options{AfterCommit: s.hook})
	s.check(t, placed)
	if f.OrderRows(t) != 5 {
		t.Fatalf("rows %d, want 5", f.OrderRows(t))
	}
}

// A failing hook is retried; one that keeps failing is given up on, and
// the orders are acknowledged and confirmed all the same.
func TestAfterCommitFailureNeverLosesAnOrder(t *testing.T) {
	t.Parallel()
	f, _, u := newSale(t, 10)
	first := f.place(t, u, "s", 1)

	var calls atomic.Int64
	flaky := func(ctx context.Context, orders []Persisted) error {
		if calls.Add(1) < afterCommitAttempts {
			return errors.New("hook down")
		}
		return nil
	}
	f.drain(t, "w1", Options{AfterCommit: flaky})
	if calls.Load() != afterCommitAttempts {
		t.Fatalf("flaky hook called %d times, want %d", calls.Load(), afterCommitAttempts)
	}

	second := f.place(t, u, "s", 1)
	calls.Store(0)
	broken := func(context.Context, []Persisted) error { calls.Add(1); return errors.New("hook down for good") }
	f.drain(t, "w1", Options{AfterCommit: broken})
	if calls.Load() != afterCommitAttempts {
		t.Fatalf("broken hook called %d times, want %d", calls.Load(), afterCommitAttempts)
	}
	for _, p := range []order.Placed{first, second} {
		if o, err := f.svc.Get(context.Background(), u, p.OrderID); err != nil || o.Status != order.StatusConfirmed {
			t.Fatalf("order %s: %+v %v, want confirmed", p.OrderID, o, err)
		}
	}
	if f.OrderRows(t) != 2 || f.pendingCount(t) != 0 {
		t.Fatalf("rows %d pending %d, want 2 and 0", f.OrderRows(t), f.pendingCount(t))
	}
}

// A COMMIT whose answer is lost (the connection cut right after COMMIT
// reached PostgreSQL): the retry inserts nothing, since the rows are
// there, yet the hook must still see those orders once, or their
// best-seller counts would be lost for good.
func TestAfterCommitAfterALostCommitAnswer(t *testing.T) {
	t.Parallel()
	f, _, u := newSale(t, 10)
	placed := f.placeN(t, u, "s", 5, 1)
	cc := f.DB.Pool.Config().ConnConfig
	proxy := testenv.NewToxiProxy(t, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	cut := proxy.Add(t, testenv.Toxic{Name: "cut", Type: "commit_cut", Stream: "upstream",
		Attributes: map[string]any{"times": 1}}).(*testenv.CommitCut)
	f.WriterDB = poolAt(t, proxy.Addr(), f.DB.URL)
	s := newSeen()
	f.drain(t, "w1", Options{AfterCommit: s.hook})
	if cut.Fired() != 1 {
		t.Fatalf("%d COMMITs cut, want 1: the test tested nothing", cut.Fired())
	}
	s.check(t, placed)
	if f.OrderRows(t) != 5 {
		t.Fatalf("rows %d, want 5", f.OrderRows(t))
	}
}
