// Package lock gives singleton jobs (index rebuilds, stream trimming,
// expiry sweeps) a Redis lock, so that usually one instance does the work
// at a time.
//
// The reasoning behind it is in docs/design/lock.md.
package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// Errors of the lock's operations.
var (
	// ErrBusy: another holder has the lock.
	ErrBusy = errors.New("lock: held by another instance")
	// ErrNotHeld: the lock expired or was taken over; an Extend or Release
	// with a stale token changes nothing.
	ErrNotHeld = errors.New("lock: not held")
)

// waitStep is how often RunWait and ObtainWait try again.
const waitStep = 50 * time.Millisecond

// Locker hands out named locks. Make it with New.
type Locker struct {
	client *redislock.Client
	prefix string
}

// New returns a Locker on rdb whose keys start with prefix.
func New(rdb redis.UniversalClient, prefix string) *Locker {
	return &Locker{client: redislock.New(rdb), prefix: prefix}
}

// Lock is a held lock.
type Lock struct {
	l    *redislock.Lock
	name string
}

// Obtain takes the lock named name for ttl, trying once. It returns
// ErrBusy when another holder has it, or the Redis error.
func (lk *Locker) Obtain(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	return lk.obtain(ctx, name, ttl, redislock.NoRetry())
}

// ObtainWait is Obtain that tries again until ctx ends or, when ctx has
// no deadline, for ttl (a holder that stopped extending has lost it by
// then); it returns ErrBusy when it gives up.
func (lk *Locker) ObtainWait(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	return lk.obtain(ctx, name, ttl, redislock.LinearBackoff(waitStep))
}

func (lk *Locker) obtain(ctx context.Context, name string, ttl time.Duration, retry redislock.RetryStrategy) (*Lock, error) {
	l, err := lk.client.Obtain(ctx, lk.prefix+"lock:"+name, ttl, &redislock.Options{RetryStrategy: retry})
	switch {
	case errors.Is(err, redislock.ErrNotObtained), err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("lock %s: %w", name, ErrBusy)
	case err != nil:
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return &Lock{l: l, name: name}, nil
}

// Token is the lock's random token: the value of its key while it is held.
func (k *Lock) Token() string { return k.l.Token() }

// Key is the lock's Redis key, for a script that checks the token itself.
func (k *Lock) Key() string { return k.l.Key() }

// Extend sets the lock's TTL to ttl if this holder still has it (the token
// is checked in the same script). It returns ErrNotHeld otherwise.
func (k *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	err := k.l.Refresh(ctx, ttl, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return fmt.Errorf("extend lock %s: %w", k.name, ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("extend lock %s: %w", k.name, err)
	}
	return nil
}

// Release gives the lock up if this holder still has it (token-checked:
// never another holder's lock). It returns ErrNotHeld otherwise.
func (k *Lock) Release(ctx context.Context) error {
	err := k.l.Release(ctx)
	if errors.Is(err, redislock.ErrLockNotHeld) {
		return fmt.Errorf("release lock %s: %w", k.name, ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("release lock %s: %w", k.name, err)
	}
	return nil
}
