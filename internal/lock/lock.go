// Package lock gives singleton jobs (index rebuilds, stream trimming,
// expiry sweeps) a Redis lock, so that usually one instance does the work
// at a time.
//
// It is an efficiency lock, never a correctness guard: a lock can be lost
// without its holder knowing in time (a GC pause or a network partition
// longer than the TTL, a Redis failover that loses the key), so every job
// run under it must stay correct when two instances run it at once. Its
// own atomic steps (a Lua script, a PostgreSQL transaction, a generation
// check before a swap) are what keep the data right; the lock only saves
// the duplicate work.
//
// # Library
//
// The lock is github.com/bsm/redislock, chosen over go-redsync/redsync v4:
//
//   - redislock is a single-key lock (SET NX PX with a random token; Lua
//     for token-checked refresh and release) that takes any go-redis v9
//     client, a redis.UniversalClient included, so it works on one Redis
//     and, the key living on one shard, on Redis Cluster.
//   - redsync implements Redlock over several independent masters. Its
//     quorum only buys something with several masters, which the shop does
//     not run; with one pool it is the same SET NX PX with a heavier API
//     (Mutex values carrying their options) and a go.mod that pulls in
//     every Redis client it adapts.
//
// Neither gives fencing tokens, which is why correctness stays with the
// jobs (see above).
//
// # Use
//
// Run is what a job wants: it obtains the lock or returns ErrBusy at once,
// keeps it extended while the job runs, cancels the job's context if the
// lock is lost, and releases it after. RunWait waits for the lock instead.
// Obtain, Extend and Release are there for jobs that manage the lock
// themselves. Keys are "<prefix>lock:<name>".
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
