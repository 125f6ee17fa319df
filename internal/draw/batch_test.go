package draw

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/racetest"
)

// Calls made while a statement runs wait and go in the next, together,
// in slices of at most size, with no more statements at once than
// flushers; each call gets its own answer.
func TestBatchGathersTheCallsMadeMeanwhile(t *testing.T) {
	t.Parallel()
	const n, size = 40, 16
	var mu sync.Mutex
	var slices []int
	running, most := 0, 0
	started, first := make(chan struct{}), make(chan struct{})
	b := newBatch("test", size, 1, func(_ context.Context, ins []int) ([]int, error) {
		mu.Lock()
		slices = append(slices, len(ins))
		running++
		most = max(most, running)
		isFirst := len(slices) == 1
		mu.Unlock()
		if isFirst {
			close(started)
			<-first // the other calls queue behind this statement
		}
		out := make([]int, len(ins))
		for i, in := range ins {
			out[i] = in * 2
		}
		mu.Lock()
		running--
		mu.Unlock()
		return out, nil
	})
	got := make([]int, n)
	wait := racetest.Start(func() { got[0], _ = b.do(context.Background(), 0) })
	<-started
	waitOthers := racetest.Start(racetest.Times(n-1, func(i int) { got[i+1], _ = b.do(context.Background(), i+1) })...)
	waitPending(b, n-1)
	close(first)
	wait()
	waitOthers()
	for i, v := range got {
		if v != 2*i {
			t.Fatalf("call %d answered %d, want %d", i, v, 2*i)
		}
	}
	if want := []int{1, size, size, n - 1 - 2*size}; fmt.Sprint(slices) != fmt.Sprint(want) || most != 1 {
		t.Fatalf("slices %v (want %v), %d at once (want 1)", slices, want, most)
	}
}

// waitPending waits until n calls wait for a statement.
func waitPending[In, Out any](b *batch[In, Out], n int) {
	for {
		b.mu.Lock()
		k := len(b.pending)
		b.mu.Unlock()
		if k == n {
			return
		}
		runtime.Gosched()
	}
}

// A failed statement answers every call of its slice with the error, and
// the calls after it are written as usual.
func TestBatchErrorAnswersItsSlice(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	b := newBatch("test", 8, 1, func(_ context.Context, ins []int) ([]int, error) {
		if ins[0] < 0 {
			return nil, boom
		}
		return ins, nil
	})
	if _, err := b.do(context.Background(), -1); !errors.Is(err, boom) {
		t.Fatalf("failed statement: %v", err)
	}
	if v, err := b.do(context.Background(), 7); v != 7 || err != nil {
		t.Fatalf("next statement: %d %v", v, err)
	}
}

// One statement writes the entries of several draws, each at its round's
// price, and writes none of those the contract refuses: a product that is
// no draw, a quantity over the limit, the shopper's second entry (in the
// same statement), and a repeated Idempotency-Key. Enter explains those
// one by one.
func TestInsertEntriesWritesOnlyTheValid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	roundA, roundB := f.draw(t, "drop-a", 5, 2), f.draw(t, "drop-b", 5, 1)
	ordertesting.OpenSale(t, f.db.Pool, f.stock, f.r, "plain", 5, 1, 100)
	users := ordertesting.Users(t, f.db.Pool, 5)
	entry := func(sku, user string, qty int, key string) newEntry {
		return newEntry{id: uuid.NewString(), sku: sku, user: user, quantity: qty, idemKey: key, fingerprint: fingerprint(sku, qty)}
	}
	if _, err := f.svc.insertEntries(ctx, []newEntry{entry("drop-a", users[4], 1, "used")}); err != nil {
		t.Fatal(err)
	}
	ins := []newEntry{
		entry("drop-a", users[0], 2, ""),     // written, 2 x 100
		entry("drop-b", users[0], 1, "k1"),   // written: another draw
		entry("drop-b", users[1], 2, ""),     // over drop-b's limit of 1
		entry("plain", users[2], 1, ""),      // no draw
		entry("drop-a", users[3], 1, ""),     // written
		entry("drop-a", users[3], 1, ""),     // the same shopper again
		entry("drop-b", users[4], 1, "used"), // the key of users[4]'s entry in drop-a
		entry("drop-c", users[2], 1, ""),     // no such product
	}
	got, err := f.svc.insertEntries(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		written       bool
		round, amount int64
	}{{true, roundA, 200}, {true, roundB, 100}, {}, {}, {true, roundA, 100}, {}, {}, {}}
	for i, w := range want {
		if g := got[i]; g.written != w.written || g.roundID != w.round || g.amount != w.amount {
			t.Errorf("entry %d (%s): %+v, want %+v", i, ins[i].sku, g, w)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM draw_entries WHERE state = 'authorizing'`); n != 4 {
		t.Fatalf("%d rows, want 4", n)
	}
}
