package lock

import (
	"context"
	"errors"
	"time"
)

// Run runs job while holding the lock named name: it obtains the lock for
// ttl (ErrBusy at once when another holder has it, and job does not run),
// extends it every ttl/3 while job runs, and releases it when job returns.
// If an extension finds the lock lost, job's context is cancelled: the job
// should stop soon, though it must be correct even if it does not (see the
// package doc). Run returns job's error, or ErrNotHeld when job succeeded
// but the lock was lost meanwhile.
func (lk *Locker) Run(ctx context.Context, name string, ttl time.Duration, job func(context.Context) error) error {
	k, err := lk.Obtain(ctx, name, ttl)
	if err != nil {
		return err
	}
	return k.hold(ctx, ttl, job)
}

// RunWait is Run that waits for the lock as ObtainWait does.
func (lk *Locker) RunWait(ctx context.Context, name string, ttl time.Duration, job func(context.Context) error) error {
	k, err := lk.ObtainWait(ctx, name, ttl)
	if err != nil {
		return err
	}
	return k.hold(ctx, ttl, job)
}

// hold runs job with the lock kept extended, then releases it.
func (k *Lock) hold(ctx context.Context, ttl time.Duration, job func(context.Context) error) error {
	jctx, cancel := context.WithCancel(ctx)
	lost := make(chan error, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		lost <- k.keep(jctx, ttl, stop)
		cancel()
	}()
	err := job(jctx)
	close(stop)
	<-done
	cancel()
	keepErr := <-lost
	// Released detached from ctx: a cancelled caller still frees the lock
	// for others instead of leaving it to expire.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer rcancel()
	relErr := k.Release(rctx)
	switch {
	case err != nil:
		return err
	case keepErr != nil:
		return keepErr
	case errors.Is(relErr, ErrNotHeld):
		return relErr
	}
	// Any other release failure: the lock expires by itself within ttl.
	return nil
}

// keep extends the lock every ttl/3 until stop is closed; it returns
// ErrNotHeld (wrapped) when the lock was lost, nil otherwise. A failed
// extension for another reason (Redis did not answer) is tried again at
// the next tick: the lock may still be held.
func (k *Lock) keep(ctx context.Context, ttl time.Duration, stop <-chan struct{}) error {
	t := time.NewTicker(max(ttl/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := k.Extend(ctx, ttl); errors.Is(err, ErrNotHeld) {
				return err
			}
		}
	}
}
