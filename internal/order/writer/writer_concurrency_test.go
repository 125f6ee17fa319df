package writer

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/order"
)

// TestConcurrentWriterWritesEachOrderOnce: a writer with several loops,
// racing over small batches of one sale round, persists every order
// exactly once, adds each unit to the sold count once and confirms all.
func TestConcurrentWriterWritesEachOrderOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round := f.Sale(t, "sku-c", 1000, 0, 100)
	users := []string{f.User(t), f.User(t), f.User(t)}
	buyer := map[string]string{} // order id -> user
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := users[i%3]
			for range 50 {
				p, err := f.svc.Place(context.Background(), u, []order.Line{{SKU: "sku-c", Quantity: 1}}, order.PlaceOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				buyer[p.OrderID] = u
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	f.drain(t, "w", Options{Concurrency: 3, Batch: 7})
	f.wantWritten(t, round, 300, 300)
	for id, u := range buyer {
		if o, err := f.svc.Get(context.Background(), u, id); err != nil || o.Status != order.StatusConfirmed {
			t.Fatalf("order %s: %+v, %v; want confirmed", id, o, err)
		}
	}
	consumers, err := f.R.Client.XInfoConsumers(context.Background(), f.keys.Stream(0), group).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range consumers {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"w-1", "w-2", "w-3"}) {
		t.Errorf("consumers %v, want w-1 w-2 w-3", names)
	}
}

// TestConcurrentWriterOverlapsBatchesOnlyWhenBehind: a writer of three
// loops writes a trickle with its first loop alone (the others wait for a
// backlog, so the trickle is not split into a commit per order or two),
// and with several loops once the stream is behind. Each transaction is
// held 40 ms before its COMMIT, so the next orders of the trickle arrive
// while one is in flight, and an entry delivered to a loop stays in its
// pending list long enough for a sampler (every 5 ms) to see whose it is;
// for the backlog, the first transaction is held until 200 orders wait.
func TestConcurrentWriterOverlapsBatchesOnlyWhenBehind(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round := f.Sale(t, "sku-p", 1000, 0, 100)
	u := f.User(t)
	var paused atomic.Pointer[chan struct{}] // while set, transactions wait for it to close
	hold := func() error {
		if p := paused.Load(); p != nil {
			<-*p
		}
		time.Sleep(40 * time.Millisecond)
		return nil
	}
	// A batch of 50: the trickle's 20 orders cannot fill one however
	// slowly the first loop goes; the backlog's 200 fill four.
	w := f.writer("w", Options{Concurrency: 3, Batch: 50})
	w.InjectFaults(hold, nil)
	r := start(w)
	defer r.Stop(t)

	// A trickle: an order every 20 ms, a few per transaction.
	seen := f.pendingOwners(t)
	for range 20 {
		f.place(t, u, "sku-p", 1)
		time.Sleep(20 * time.Millisecond)
	}
	f.drained(t)
	if got := seen(); !slices.Equal(got, []string{"w-1"}) {
		t.Fatalf("loops that held entries during a trickle: %v, want [w-1]", got)
	}

	// A backlog: four full batches waiting when the first is let go.
	seen = f.pendingOwners(t)
	gate := make(chan struct{})
	paused.Store(&gate)
	for range 200 {
		f.place(t, u, "sku-p", 1)
	}
	paused.Store(nil)
	close(gate)
	f.drained(t)
	if got := seen(); len(got) < 2 {
		t.Fatalf("loops that held entries with a backlog: %v, want two or three", got)
	}
	f.wantWritten(t, round, 220, 220)
}

// pendingOwners samples, every 5 ms until the function it returns is
// called, which consumers hold pending entries in any partition's group;
// that function stops it and returns their names, sorted.
func (f *fixture) pendingOwners(t *testing.T) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	names := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for p := range f.Parts.Count() {
				if s, err := f.R.Client.XPending(ctx, f.keys.Stream(p), group).Result(); err == nil {
					for c, n := range s.Consumers {
						if n > 0 {
							names[c] = true
						}
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() []string {
		cancel()
		<-done
		return slices.Sorted(maps.Keys(names))
	}
}

// TestConcurrentWriterStopsTogether: when one loop stops on a crash, Run
// stops every loop and returns the error; what was not acknowledged is
// left pending for the next start, which writes it once.
func TestConcurrentWriterStopsTogether(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 100)
	f.placeN(t, u, "s", 40, 1)
	w := f.writer("w", Options{Concurrency: 2, Batch: 5})
	w.faultAfterCommit = crashOnce()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "simulated crash") {
			t.Fatalf("Run = %v, want the simulated crash", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after one loop crashed")
	}
	f.drain(t, "w", Options{Concurrency: 2, Batch: 5})
	if rows, sold := f.OrderRows(t), f.Sold(t, round); rows != 40 || sold != 40 {
		t.Fatalf("rows %d sold %d after the restart, want 40 and 40", rows, sold)
	}
}
