package audit

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/telemetry"
)

// Last is the latest audit's outcome, whoever ran it: an instance's
// schedule, the admin route or `shop audit`.
type Last struct {
	At       time.Time
	Problems int
}

// lastTTL keeps an outcome long after any schedule would have replaced it.
const lastTTL = 7 * 24 * time.Hour

// remember stores rep as the latest outcome, so that every instance's
// metrics report the same one. An audit that cannot store it still
// answers: the metrics only lag.
func (a *Auditor) remember(ctx context.Context, rep Report) {
	err := a.rdb.HSet(ctx, a.lastKey, "at_ms", time.Now().UnixMilli(), "problems", len(rep.Problems)).Err()
	if err == nil {
		err = a.rdb.Expire(ctx, a.lastKey, lastTTL).Err()
	}
	if err != nil {
		a.log.Warn("audit: its outcome not stored for the metrics", "err", err)
	}
}

// Latest reads the latest audit's outcome; ok is false when none is kept.
func (a *Auditor) Latest(ctx context.Context) (l Last, ok bool, err error) {
	m, err := a.rdb.HGetAll(ctx, a.lastKey).Result()
	if err != nil || m["at_ms"] == "" {
		return Last{}, false, err
	}
	ms, _ := strconv.ParseInt(m["at_ms"], 10, 64)
	n, _ := strconv.Atoi(m["problems"])
	return Last{At: time.UnixMilli(ms), Problems: n}, true, nil
}

// scheduleLockTTL bounds how long a dead instance's claim on the schedule
// holds it up; the holder extends it while its audit runs.
const scheduleLockTTL = 30 * time.Second

// Every runs an audit about every interval across all instances, until
// ctx ends: each one ticks, and the one that wins the lock audits unless
// another audit ran in the last half interval.
func (a *Auditor) Every(ctx context.Context, locks *lock.Locker, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := locks.Run(ctx, "audit", scheduleLockTTL, func(ctx context.Context) error {
			if l, ok, err := a.Latest(ctx); err != nil || (ok && time.Since(l.At) < interval/2) {
				return err
			}
			// Only a tick that audits is traced: the lock's and the
			// latest outcome's reads of the others start nothing.
			ctx, span := telemetry.Job(ctx, "audit: scheduled run")
			_, err := a.Run(ctx)
			telemetry.End(span, err)
			if a.AfterRun != nil {
				a.AfterRun()
			}
			return err
		})
		if err != nil && !errors.Is(err, lock.ErrBusy) && ctx.Err() == nil {
			a.log.Warn("scheduled audit not run", "err", err)
		}
	}
}
