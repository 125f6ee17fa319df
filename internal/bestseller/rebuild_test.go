package bestseller

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/racetest"
)

func TestRebuildRecomputesFromPostgreSQL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, s := range []string{"p1", "p2", "p3"} {
		f.round(t, s)
	}
	counted := []Order{
		f.persist(t, fixedNow, Line{"p1", 2}),
		f.persist(t, day(-2), Line{"p2", 3}),
		f.persist(t, day(-40), Line{"p1", 4}, Line{"p3", 1}),
	}
	mustApply(t, f.s.Record, counted...)
	// Persisted, but its hook has not run yet when the rebuild reads.
	late := f.persist(t, fixedNow, Line{"p3", 7})
	// The boards drift: a stray SKU, a wrong score, a lost board.
	f.r.Client.ZAdd(ctx, f.s.keys.board(Day, fixedNow), redisZ("ghost", 5), redisZ("p1", 99))
	f.r.Client.Del(ctx, f.s.keys.board(Week, fixedNow))

	if err := f.s.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	checkBoards(t, f)
	if got := f.board(t, Day); !maps.Equal(got, map[string]int64{"p1": 2, "p3": 7}) {
		t.Fatalf("day board %v", got)
	}
	// The late hook finds the order counted by the rebuild.
	if res, err := f.s.Record(ctx, []Order{late}); err != nil || res.Applied != 0 {
		t.Fatalf("late hook: %+v, %v; want nothing applied", res, err)
	}
	checkBoards(t, f)
	// The rebuilt boards keep their expiries.
	if got := f.r.Client.ExpireTime(ctx, f.s.keys.board(Day, fixedNow)).Val(); got != time.Duration(day(2).Unix())*time.Second {
		t.Errorf("day board expires at %v", got)
	}
	if got := f.r.Client.TTL(ctx, f.s.keys.board(All, fixedNow)).Val(); got != -1 {
		t.Errorf("all-time board TTL %v", got)
	}
}

// An order counted between the rebuild's snapshot and its swap is not
// lost: the swap is refused and the rebuild starts over.
func TestRebuildRetriesWhenAnOrderIsCountedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.round(t, "p")
	mustApply(t, f.s.Record, f.persist(t, fixedNow, Line{"p", 1}))
	races := 2
	f.s.beforeSwap = func() {
		if races > 0 {
			races--
			mustApply(t, f.s.Record, f.persist(t, fixedNow, Line{"p", 10}))
		}
	}
	if err := f.s.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.board(t, Day)["p"]; got != 21 {
		t.Fatalf("p: %d units after the rebuild, want 21", got)
	}
	checkBoards(t, f)
	f.s.beforeSwap = func() { mustApply(t, f.s.Record, f.persist(t, fixedNow, Line{"p", 1})) }
	if err := f.s.Rebuild(context.Background()); !errors.Is(err, ErrRaced) {
		t.Fatalf("rebuild racing every time: %v, want ErrRaced", err)
	}
	checkBoards(t, f)
}

func TestRebuildIsLocked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	held, err := lock.New(f.r.Client, f.r.Prefix).Obtain(ctx, lockName, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx) //nolint:errcheck
	if err := f.s.Rebuild(ctx); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("Rebuild while another instance holds the lock: %v, want ErrBusy", err)
	}
}

// The lock only saves work: rebuilds running at once (as if it were lost),
// while writers persist and count orders, still leave exact boards.
func TestRebuildsAtOnceWithWritersStayExact(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, s := range []string{"p1", "p2"} {
		f.round(t, s)
	}
	mustApply(t, f.s.Record, f.persist(t, fixedNow, Line{"p1", 1}))
	ctx := context.Background()
	var swapped atomic.Int64
	rebuilders := racetest.Times(3, func(int) {
		for range 3 {
			err := f.s.rebuild(ctx) // bypassing the lock on purpose
			if err == nil {
				swapped.Add(1)
			} else if !errors.Is(err, ErrRaced) {
				t.Error(err)
			}
		}
	})
	writers := racetest.Times(3, func(w int) {
		for i := range 20 {
			o := f.persist(t, fixedNow, Line{[]string{"p1", "p2"}[(w+i)%2], int64(1 + i%3)})
			if _, err := f.s.Record(ctx, []Order{o}); err != nil {
				t.Error(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	racetest.Together(append(rebuilders, writers...)...)
	if swapped.Load() == 0 {
		t.Fatal("no rebuild swapped its boards in")
	}
	checkBoards(t, f)
}

func checkBoards(t *testing.T, f *fixture) {
	t.Helper()
	for _, p := range Periods {
		if got, want := f.board(t, p), f.truth(t, p); !maps.Equal(got, want) {
			t.Errorf("%s board %v, PostgreSQL says %v", p, got, want)
		}
	}
}

// Cancelled and expired orders are left out of a rebuild, and a take-back
// still to come for one of them takes nothing more.
func TestRebuildLeavesOutReleasedOrders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.round(t, "p")
	kept := f.persist(t, fixedNow, Line{"p", 2})
	cancelled := f.persist(t, fixedNow, Line{"p", 3})
	expired := f.persist(t, fixedNow, Line{"p", 4})
	mustApply(t, f.s.Record, kept, cancelled, expired)
	mustApply(t, f.s.TakeBack, expired) // its hook ran; the cancel's has not yet
	for o, status := range map[string]string{cancelled.ID: "cancelled", expired.ID: "expired"} {
		if _, err := f.db.Pool.Exec(ctx, `INSERT INTO order_transitions (order_id, status, at, stream_id) VALUES ($1, $2, now(), '0-2')`,
			o, status); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.s.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.board(t, All); !maps.Equal(got, map[string]int64{"p": 2}) {
		t.Fatalf("all-time board %v, want only the kept order's 2 units", got)
	}
	if res, err := f.s.TakeBack(ctx, []Order{cancelled}); err != nil || res.Applied != 0 {
		t.Fatalf("late take-back: %+v, %v; want nothing applied", res, err)
	}
	if got := f.board(t, All); !maps.Equal(got, map[string]int64{"p": 2}) {
		t.Fatalf("all-time board after the late take-back %v", got)
	}
}
