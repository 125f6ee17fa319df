package order

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConcurrentWriterWritesEachOrderOnce: a writer with several loops,
// racing over small batches of one sale round, persists every order
// exactly once, adds each unit to the sold count once and confirms all.
func TestConcurrentWriterWritesEachOrderOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round := f.sale(t, "sku-c", 1000, 0, 100)
	users := []string{f.user(t), f.user(t), f.user(t)}
	buyer := map[string]string{} // order id -> user
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := users[i%3]
			for range 50 {
				p, err := f.svc.Place(context.Background(), u, []Line{{SKU: "sku-c", Quantity: 1}}, PlaceOptions{})
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
	w := start(f.writer("w", WriterOptions{Concurrency: 3, Batch: 7}))
	f.drained(t)
	w.stop(t)
	if rows, sold := f.orderRows(t), f.sold(t, round); rows != 300 || sold != 300 {
		t.Fatalf("rows %d sold %d, want 300 and 300", rows, sold)
	}
	for id, u := range buyer {
		if o, err := f.svc.Get(context.Background(), u, id); err != nil || o.Status != StatusConfirmed {
			t.Fatalf("order %s: %+v, %v; want confirmed", id, o, err)
		}
	}
	consumers, err := f.r.Client.XInfoConsumers(context.Background(), f.svc.keys.stream(0), group).Result()
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

// TestConcurrentWriterStopsTogether: when one loop stops on a crash, Run
// stops every loop and returns the error; what was not acknowledged is
// left pending for the next start, which writes it once.
func TestConcurrentWriterStopsTogether(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round := f.sale(t, "s", 100, 0, 100)
	u := f.user(t)
	for range 40 {
		f.place(t, u, "s", 1)
	}
	w := f.writer("w", WriterOptions{Concurrency: 2, Batch: 5})
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
	again := start(f.writer("w", WriterOptions{Concurrency: 2, Batch: 5}))
	f.drained(t)
	again.stop(t)
	if rows, sold := f.orderRows(t), f.sold(t, round); rows != 40 || sold != 40 {
		t.Fatalf("rows %d sold %d after the restart, want 40 and 40", rows, sold)
	}
}
