package cache

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fill lock keeps N processes that miss one key at once from running N
// loaders: one holds the lock and loads, the others poll for its entry. It
// is a plain SET NX PX with a random owner token, released by a
// compare-and-delete so a holder whose lock expired cannot release its
// successor's. It is for efficiency only: a waiter that gives up loads by
// itself, and stores are guarded by generations, not by the lock.
var (
	//go:embed lock.lua
	lockLua    string
	lockScript = redis.NewScript(lockLua)

	//go:embed unlock.lua
	unlockLua    string
	unlockScript = redis.NewScript(unlockLua)
)

// Results of lock.lua.
const (
	lockBusy  = 0
	lockFound = 1
	lockTaken = 2
)

// heldLock names a lock this process holds; the zero value holds none.
type heldLock struct {
	key, token string
}

// acquire returns the entry if one appears, else the key's lock. It gives up
// waiting after LockWait, or at once when Redis fails, and returns a zero
// lock: the caller then loads without one.
func (c *Cache) acquire(ctx context.Context, key string) (lk heldLock, value []byte, found bool) {
	lk = heldLock{key: c.lockKey(key), token: token()}
	deadline := time.Now().Add(c.o.LockWait)
	for {
		res, value, err := c.tryLock(ctx, key, lk)
		switch {
		case err != nil:
			c.m.errors.WithLabelValues("lock").Inc()
			return heldLock{}, nil, false
		case res == lockFound:
			return heldLock{}, value, true
		case res == lockTaken:
			return lk, nil, false
		case time.Now().After(deadline):
			return heldLock{}, nil, false
		}
		select {
		case <-ctx.Done():
			return heldLock{}, nil, false
		case <-time.After(pollInterval):
		}
	}
}

// tryLock reads the entry and, when there is none, tries to take the lock,
// in one round trip.
func (c *Cache) tryLock(ctx context.Context, key string, lk heldLock) (int64, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	res, err := lockScript.Run(ctx, c.rdb, []string{c.entryKey(key), lk.key}, lk.token, ms(c.o.LockTTL)).Slice()
	if err != nil {
		return 0, nil, err
	}
	code, _ := res[0].(int64)
	if code == lockFound && len(res) > 1 {
		s, _ := res[1].(string)
		return code, []byte(s), nil
	}
	return code, nil, nil
}

// release drops the lock if this process still owns it.
func (c *Cache) release(ctx context.Context, lk heldLock) {
	if lk.token == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	if err := unlockScript.Run(ctx, c.rdb, []string{lk.key}, lk.token).Err(); err != nil {
		c.m.errors.WithLabelValues("unlock").Inc()
	}
}
