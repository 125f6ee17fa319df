package bestseller

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/racetest"
)

func ord(id string, at time.Time, lines ...Line) Order { return Order{ID: id, At: at, Lines: lines} }

func TestRecordCountsEachOrderOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := ord("a", fixedNow, Line{"p1", 2}, Line{"p2", 1})
	b := ord("b", fixedNow, Line{"p1", 3})
	c := ord("c", fixedNow, Line{"p2", 5})
	for _, step := range []struct {
		name    string
		batch   []Order
		applied int
	}{
		{"first", []Order{a, b}, 2},
		{"hook_retried", []Order{a, b}, 0},
		{"retried_with_more", []Order{a, b, c}, 1},
		{"same_order_twice_in_a_batch", []Order{c, c}, 0},
	} {
		res, err := f.s.Record(ctx, step.batch)
		if err != nil || res.Applied != step.applied || res.Applied+res.Skipped != len(step.batch) {
			t.Fatalf("%s: %+v, %v; want %d applied", step.name, res, err, step.applied)
		}
	}
	want := map[string]int64{"p1": 5, "p2": 6}
	for _, p := range Periods {
		if got := f.board(t, p); !maps.Equal(got, want) {
			t.Errorf("%s board %v, want %v", p, got, want)
		}
	}
}

func TestTakeBackOnlyWhatWasCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := ord("a", fixedNow, Line{"p1", 2})
	b := ord("b", fixedNow, Line{"p1", 3}, Line{"p2", 1})
	early := ord("early", fixedNow, Line{"p1", 7})
	mustApply(t, f.s.Record, a, b)
	if res, _ := f.s.TakeBack(ctx, []Order{b, b}); res.Applied != 1 {
		t.Fatalf("take back b twice: %+v, want 1 applied", res)
	}
	if res, _ := f.s.TakeBack(ctx, []Order{b}); res.Applied != 0 {
		t.Fatalf("take back b again: %+v", res)
	}
	// Cancelled before the writer persisted it: the later count is void.
	if res, _ := f.s.TakeBack(ctx, []Order{early}); res.Applied != 0 {
		t.Fatalf("take back uncounted: %+v", res)
	}
	if res, _ := f.s.Record(ctx, []Order{early, b}); res.Applied != 0 {
		t.Fatalf("record after take-back: %+v, want nothing applied", res)
	}
	want := map[string]int64{"p1": 2} // p2 fell to zero and left the board
	if got := f.board(t, Day); !maps.Equal(got, want) {
		t.Fatalf("board %v, want %v", got, want)
	}
}

func mustApply(t *testing.T, op func(context.Context, []Order) (Result, error), orders ...Order) {
	t.Helper()
	res, err := op(context.Background(), orders)
	if err != nil || res.Applied != len(orders) {
		t.Fatalf("%+v, %v; want %d applied", res, err, len(orders))
	}
}

func TestRecordPutsOrdersInTheirPeriods(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mustApply(t, f.s.Record,
		ord("today", fixedNow, Line{"p", 1}),
		ord("monday", day(-2), Line{"p", 10}),
		ord("last-sunday", day(-2).Add(-time.Second), Line{"p", 100}),
		ord("last-month", day(1-fixedNow.Day()).Add(-time.Hour), Line{"p", 1000}),
		ord("long-ago", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), Line{"p", 10000}),
		// Days met again later in the batch (their boards are worked out
		// once a batch) go to the same boards.
		ord("today-again", fixedNow.Add(-time.Hour), Line{"p", 100000}),
		ord("monday-again", day(-2).Add(time.Hour), Line{"p", 1000000}),
	)
	for p, want := range map[Period]int64{Day: 100001, Week: 1100011, Month: 1100111, All: 1111111} {
		if got := f.board(t, p)["p"]; got != want {
			t.Errorf("%s: %d units, want %d", p, got, want)
		}
	}
	// Each board outlives its period by one more; all time never expires.
	ctx := context.Background()
	for p, want := range map[Period]time.Time{
		Day:   day(2),
		Week:  day(-2 + 14),
		Month: day(1-fixedNow.Day()).AddDate(0, 2, 0),
	} {
		got := f.r.Client.ExpireTime(ctx, f.s.keys.board(p, fixedNow)).Val()
		if got != time.Duration(want.Unix())*time.Second {
			t.Errorf("%s board expires at %v, want %v", p, time.Unix(int64(got/time.Second), 0).UTC(), want)
		}
	}
	if got := f.r.Client.TTL(ctx, f.s.keys.board(All, fixedNow)).Val(); got != -1 {
		t.Errorf("all-time board TTL %v, want none", got)
	}
	// The 2020 day board had expired long before: it is not recreated.
	if n := f.r.Client.Exists(ctx, f.s.keys.board(Day, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))).Val(); n != 0 {
		t.Error("an expired day board was recreated")
	}
}

func TestRecordRefusesMalformedBatchesWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	good := ord("good", fixedNow, Line{"p", 1})
	for name, bad := range map[string]Order{
		"no_id":      ord("", fixedNow, Line{"p", 1}),
		"no_time":    ord("x", time.Time{}, Line{"p", 1}),
		"no_lines":   ord("x", fixedNow),
		"bad_sku":    ord("x", fixedNow, Line{"a b", 1}),
		"zero_units": ord("x", fixedNow, Line{"p", 0}),
	} {
		if _, err := f.s.Record(context.Background(), []Order{good, bad}); !errors.Is(err, ErrInvalidOrder) {
			t.Errorf("%s: %v, want ErrInvalidOrder", name, err)
		}
	}
	if got := f.board(t, Day); len(got) != 0 {
		t.Fatalf("board %v after refused batches", got)
	}
}

// Many writers persist orders for the same SKUs at once, each hook also
// retried, and some orders handed over again by another writer: the
// boards end exactly as PostgreSQL says.
func TestRaceManyWritersSameSKUs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	skus := []string{"hot-1", "hot-2", "hot-3"}
	for _, s := range skus {
		f.round(t, s)
	}
	const writers, batches = 12, 10
	var mu sync.Mutex
	var all []Order
	racetest.Together(racetest.Times(writers, func(w int) {
		for b := range batches {
			var batch []Order
			for i := range 5 {
				batch = append(batch, f.persist(t, fixedNow,
					Line{skus[(w+i)%3], int64(1 + (b+i)%4)}, Line{skus[(w+i+1)%3], 1}))
			}
			for range 2 { // the hook, then its retry after COMMIT
				if _, err := f.s.Record(context.Background(), batch); err != nil {
					t.Error(err)
				}
			}
			mu.Lock()
			all = append(all, batch...)
			mu.Unlock()
		}
	})...)
	// Every order once more, as a redelivery that slipped through would.
	if res, err := f.s.Record(context.Background(), all); err != nil || res.Applied != 0 {
		t.Fatalf("redelivered: %+v, %v; want nothing applied", res, err)
	}
	for _, p := range Periods {
		got, want := f.board(t, p), f.truth(t, p)
		if !maps.Equal(got, want) || len(want) != 3 {
			t.Errorf("%s board %v, PostgreSQL says %v", p, got, want)
		}
	}
}
