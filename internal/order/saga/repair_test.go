package saga

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"

	"github.com/redis/go-redis/v9"
)

// writeOrder runs a writer until PostgreSQL has order id.
func (f *clusterFixture) writeOrder(t *testing.T, id string) {
	t.Helper()
	w := f.writer()
	running := start(w)
	defer running.Stop(t)
	for deadline := time.Now().Add(30 * time.Second); f.count(t, `SELECT count(*) FROM orders WHERE id = $1`, id) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the order was not written within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The order id of an Idempotency-Key is reused by its repeat: attempt a1
// holds the first cart's line on partition 5 and stops (the server
// killed); the buyer drops that line, and the repeat (attempt a2, the same
// id) holds partition 9 instead and commits, and the writer persists it.
// Then the order's status is lost (a failover), or recover has written it
// back from PostgreSQL (no attempt). At a1's deadline the repair finds the
// order committed, but not with a1's items: a1's hold is given back (the
// units and the buyer's count), not dropped into the settled log under an
// order that never took them, and no tombstone is left over the order.
func TestRepairGivesBackTheHoldOfAnotherAttemptOfAPersistedOrder(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	for _, restored := range []bool{false, true} {
		u := f.user(t)
		tag := fmt.Sprintf("reuse-%v", restored)
		a, b, c := f.skuIn(t, tag+"-a", 1, 10), f.skuIn(t, tag+"-b", 5, 10), f.skuIn(t, tag+"-c", 9, 10)
		first := []order.Line{{SKU: a, Quantity: 1}, {SKU: b, Quantity: 4}}
		id := f.orderID(t, first)
		f.take(t, 5, id, u, "a1", first[1:])
		repeat := []order.Line{{SKU: a, Quantity: 1}, {SKU: c, Quantity: 2}}
		items := f.take(t, 9, id, u, "a2", repeat[1:])
		held := []heldPart{{p: 9, items: items}}
		res := f.commitOf(t, id, u, "a2", repeat, held)
		f.saga.dropAll(ctx, id, u, "a2", held)
		f.writeOrder(t, id)
		f.rdb.Del(ctx, f.saga.keys.Status(id)) // the failover
		if restored {
			f.restore(t, id, u, res)
		}
		settledBefore := f.rdb.ZRange(ctx, f.saga.keys.Settled(5), 0, -1).Val()
		f.rdb.ZAdd(ctx, f.saga.keys.Holds(5), redis.Z{Score: 1, Member: id}) // a1's deadline passed
		sw := f.sweeper(RepairOptions{Persisted: ledger.PersistedIn(f.db.Pool)})
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if got := f.available(t, b); got != 10 {
			t.Fatalf("restored %v: %s available %d after the repair, want 10 (a1's hold given back)", restored, b, got)
		}
		if n := f.rdb.HGet(ctx, f.stock.BuyersKey(b), u).Val(); n != "" {
			t.Fatalf("restored %v: %s still counts %s units of the buyer", restored, b, n)
		}
		if got, want := f.available(t, c), int64(8); got != want {
			t.Fatalf("restored %v: %s available %d, want %d (the order's)", restored, c, got, want)
		}
		for _, e := range f.rdb.ZRange(ctx, f.saga.keys.Settled(5), 0, -1).Val() {
			if strings.Contains(e, id) {
				t.Fatalf("restored %v: partition 5's settled log names the order: %s (before: %v)", restored, e, settledBefore)
			}
		}
		// Lost or restored, the order's status is there after the repair
		// (back from PostgreSQL), not a tombstone over a persisted order.
		if st := f.rdb.HGet(ctx, f.saga.keys.Status(id), "status").Val(); st != order.StatusConfirmed {
			t.Fatalf("restored %v: status %q after the repair, want %q", restored, st, order.StatusConfirmed)
		}
		f.noHolds(t)
	}
}

// The repair tombstones an order whose status is gone before it asks
// PostgreSQL, and settles the hold only after the answer: when it asks,
// no attempt can commit the order any more and the hold still holds its
// units, so a commit landing while PostgreSQL is asked cannot leave a
// written order whose units were given back. Meanwhile the tombstone is
// marked deciding: a commit, and a repeat of the order's Idempotency-Key,
// are told to retry, not that the order is aborted (a repeat would start
// a second order for the key). Asked with the order written (a failover
// lost its status), the repair drops the hold, puts the order's status
// back over the tombstone (a repeat of its key is then answered that
// order) and keeps the units the order's; asked with an order PostgreSQL does not
// have, the tombstone becomes final and a repeat starts afresh.
func TestRepairTombstonesBeforeItAsksPostgreSQL(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	u, lines := f.user(t), f.onOneAndFive(t, "order-a", "order-b", 4)
	a, b := lines[0].SKU, lines[1].SKU
	fp := f.saga.Fingerprint(lines, false)
	newOrder := func(key string) (string, string) {
		id := f.orderID(t, lines)
		idem := f.saga.keys.Idem(u, key)
		if got, _, err := f.saga.claim(ctx, idem, fp, id, ""); err != nil || got != id {
			t.Fatalf("claim: %s %v", got, err)
		}
		return id, idem
	}
	written, writtenIdem := newOrder("written")
	items := f.take(t, 5, written, u, "a1", lines[1:])
	f.commitOf(t, written, u, "a1", lines, []heldPart{{p: 5, items: items}})
	f.writeOrder(t, written)
	f.rdb.Del(ctx, f.saga.keys.Status(written)) // the failover
	f.rdb.ZAdd(ctx, f.saga.keys.Holds(5), redis.Z{Score: 1, Member: written})

	type look struct {
		status     string
		available  int64
		lateCommit error
		repeat     error
	}
	looks := map[string]look{}
	idems := map[string]string{written: writtenIdem}
	persisted := ledger.PersistedIn(f.db.Pool)
	hook := func(ctx context.Context, id string) (*ledger.PersistedOrder, error) {
		l := look{status: f.rdb.HGet(ctx, f.saga.keys.Status(id), "status").Val(), available: f.available(t, b)}
		// Another run of the order committing, and a repeat of its key
		// arriving, while PostgreSQL is asked.
		_, _, l.lateCommit = f.saga.commit(ctx, id, u, "", "a3", 1, "commit", lines[:1], f.saga.linePlaces(u, lines[:1]), nil)
		fresh, _ := f.saga.NewOrderID("buyer", lines)
		_, _, l.repeat = f.saga.claimOrderID(ctx, idems[id], fp, fresh, u, lines)
		looks[id] = l
		return persisted(ctx, id)
	}
	sw := f.sweeper(RepairOptions{Persisted: hook})
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	l, ok := looks[written]
	if !ok || l.status != order.StatusAborted || l.available != 6 {
		t.Fatalf("PostgreSQL asked %v, with the status %q and %s available %d; want the tombstone and the hold still holding (6)",
			ok, l.status, b, l.available)
	}
	if !errors.Is(l.lateCommit, errSagaBusy) || !errors.Is(l.repeat, errSagaBusy) {
		t.Fatalf("while PostgreSQL was asked: a commit %v, a repeat %v; want both told to retry", l.lateCommit, l.repeat)
	}
	if got := f.available(t, b); got != 6 {
		t.Fatalf("%s available %d after the repair, want 6 (the written order keeps its units)", b, got)
	}
	if got := f.available(t, a); got != 9 {
		t.Fatalf("%s available %d, want 9 (only the written order's unit taken)", a, got)
	}
	// The written order's status is back, read from PostgreSQL, so a
	// repeat of its key is answered that order: it never runs again under
	// the same id (which would take its units a second time, for an event
	// the writer ignores).
	if st := f.rdb.HGetAll(ctx, f.saga.keys.Status(written)).Val(); st["status"] != "confirmed" || st["user_id"] != u ||
		st["deciding"] != "" || st["items"] == "" {
		t.Fatalf("status %v after the repair, want the written order's, confirmed", st)
	}
	if got, replayed, err := f.saga.claimOrderID(ctx, writtenIdem, fp, "unused", u, lines); err != nil || got != written || !replayed {
		t.Fatalf("a repeat after the repair: %s replayed %v %v, want the written order's id, replayed", got, replayed, err)
	}
	r, err := f.saga.place(ctx, u, lines, order.PlaceOptions{IdemKey: "written"})
	if err != nil || r.OrderID != written || !r.Replayed {
		t.Fatalf("the buyer's repeat after the repair: %s replayed %v %v, want the written order replayed", r.OrderID, r.Replayed, err)
	}
	if got, gotB := f.available(t, a), f.available(t, b); got != 9 || gotB != 6 {
		t.Fatalf("available %d and %d after the repeat, want 9 and 6 (nothing taken again)", got, gotB)
	}
	if log := f.rdb.ZRange(ctx, f.saga.keys.Settled(5), 0, -1).Val(); len(log) != 1 || !strings.Contains(log[0], written) {
		t.Fatalf("settled log %v, want the order's entry", log)
	}
	f.noHolds(t)

	// An order no store has: the hold goes back and the tombstone is final.
	aborted, abortedIdem := newOrder("aborted")
	idems[aborted] = abortedIdem
	f.take(t, 5, aborted, u, "a1", lines[1:])
	f.rdb.ZAdd(ctx, f.saga.keys.Holds(5), redis.Z{Score: 1, Member: aborted})
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if l := looks[aborted]; l.status != order.StatusAborted || l.available != 2 ||
		!errors.Is(l.lateCommit, errSagaBusy) || !errors.Is(l.repeat, errSagaBusy) {
		t.Fatalf("the look at an order no store has: %+v", l)
	}
	if got := f.available(t, b); got != 6 {
		t.Fatalf("%s available %d, want 6 (the aborted order's hold given back)", b, got)
	}
	if st := f.rdb.HGetAll(ctx, f.saga.keys.Status(aborted)).Val(); len(st) != 1 || st["status"] != order.StatusAborted {
		t.Fatalf("status %v after the repair, want the tombstone alone", st)
	}
	if _, _, err := f.saga.commit(ctx, aborted, u, "", "a4", 1, "commit", lines[:1], f.saga.linePlaces(u, lines[:1]), nil); !errors.Is(err, errSagaAborted) {
		t.Fatalf("a late commit: %v, want aborted", err)
	}
	if got, replayed, err := f.saga.claimOrderID(ctx, abortedIdem, fp, "x", u, lines); err != nil || got == aborted || replayed {
		t.Fatalf("a repeat of the aborted order's key: %s %v %v, want a fresh order", got, replayed, err)
	}
	f.noHolds(t)
}
