package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/racetest"
	"github.com/shop-oss/shop/internal/testenv"
)

func newLocker(t *testing.T) (*lock.Locker, *testenv.Redis) {
	t.Helper()
	r := testenv.NewRedis(t)
	return lock.New(r.Client, r.Prefix), r
}

func TestRunOneAtATime(t *testing.T) {
	t.Parallel()
	lk, _ := newLocker(t)
	ctx := context.Background()
	var running, most, ran, busy atomic.Int64
	racetest.Together(racetest.Times(20, func(int) {
		err := lk.Run(ctx, "job", 5*time.Second, func(context.Context) error {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(50 * time.Millisecond)
			running.Add(-1)
			ran.Add(1)
			return nil
		})
		if errors.Is(err, lock.ErrBusy) {
			busy.Add(1)
		} else if err != nil {
			t.Error(err)
		}
	})...)
	if most.Load() != 1 || ran.Load() < 1 || ran.Load()+busy.Load() != 20 {
		t.Fatalf("at most %d at once, %d ran, %d busy; want 1 at once", most.Load(), ran.Load(), busy.Load())
	}
	// Released: the next Run gets it at once.
	if err := lk.Run(ctx, "job", time.Second, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("after the others: %v", err)
	}
}

// A holder whose lock expired and was taken over must neither release nor
// extend the new holder's lock.
func TestReleaseAndExtendAreTokenChecked(t *testing.T) {
	t.Parallel()
	lk, r := newLocker(t)
	ctx := context.Background()
	old, err := lk.Obtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.Obtain(ctx, "job", time.Minute); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("second Obtain: %v, want ErrBusy", err)
	}
	r.Client.Del(ctx, old.Key()) // as if it had expired
	cur, err := lk.Obtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("stale Release: %v, want ErrNotHeld", err)
	}
	if err := old.Extend(ctx, time.Hour); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("stale Extend: %v, want ErrNotHeld", err)
	}
	if v := r.Client.Get(ctx, cur.Key()).Val(); v != cur.Token() {
		t.Fatalf("lock value %q, want the new holder's token %q", v, cur.Token())
	}
	if ttl := r.Client.PTTL(ctx, cur.Key()).Val(); ttl > time.Minute {
		t.Fatalf("TTL %v: the stale Extend changed it", ttl)
	}
	if err := cur.Extend(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := r.Client.PTTL(ctx, cur.Key()).Val(); ttl <= time.Minute {
		t.Fatalf("TTL %v after Extend(2m)", ttl)
	}
	if err := cur.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.Client.Exists(ctx, cur.Key()).Val(); n != 0 {
		t.Fatal("released lock still there")
	}
}

// Run keeps a lock whose job outlives the TTL, and cancels the job when
// the lock is lost anyway.
func TestRunExtendsAndNoticesLoss(t *testing.T) {
	t.Parallel()
	lk, r := newLocker(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	err := lk.Run(ctx, "long", ttl, func(ctx context.Context) error {
		time.Sleep(3 * ttl) // extended meanwhile, so still ours
		_, err := lk.Obtain(ctx, "long", ttl)
		if !errors.Is(err, lock.ErrBusy) {
			t.Errorf("Obtain during a long job: %v, want ErrBusy", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("long job: %v", err)
	}

	err = lk.Run(ctx, "lost", ttl, func(ctx context.Context) error {
		r.Client.Del(ctx, r.Prefix+"lock:lost")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(30 * time.Second):
			t.Error("job not cancelled after its lock was lost")
			return nil
		}
	})
	if !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("lost lock: Run = %v, want ErrNotHeld", err)
	}
}

func TestRunWaitWaitsForTheHolder(t *testing.T) {
	t.Parallel()
	lk, _ := newLocker(t)
	ctx := context.Background()
	held, err := lk.Obtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = held.Release(ctx)
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ran := false
	if err := lk.RunWait(wctx, "job", time.Minute, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("RunWait = %v, ran %v", err, ran)
	}
	held, _ = lk.Obtain(ctx, "job", time.Minute)
	short, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	if err := lk.RunWait(short, "job", time.Minute, func(context.Context) error { return nil }); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("RunWait past its deadline = %v, want ErrBusy", err)
	}
	_ = held.Release(ctx)
}
