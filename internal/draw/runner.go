package draw

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/lock"
)

// The runner draws each draw at its close, on one instance at a time: the
// instance holding the lock runs the draws due, the others try again
// every interval. The rows, not the lock, keep a draw from being done
// twice (run.go): a lost lock costs time, never a second capture.

const (
	runnerLock    = "draws"
	runnerLockTTL = 30 * time.Second

	// Due: open past their close, or closed and not yet drawn (a draw
	// that stopped midway).
	dueSQL = `SELECT id FROM sale_rounds
WHERE draw_state = 'closed' OR (draw_state = 'open' AND draw_closes_at <= now())
ORDER BY draw_closes_at, id LIMIT 100`
)

// RunDue runs every draw that is due and returns how many it ran; it
// stops at the first error (the draw resumes on the next call).
func (s *Service) RunDue(ctx context.Context) (int, error) {
	rows, err := s.db.Query(ctx, dueSQL)
	if err != nil {
		return 0, errorf("due draws", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, errorf("due draws", err)
	}
	for i, id := range ids {
		if err := s.Run(ctx, id); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}

// Loop runs the due draws every interval until ctx ends, under locks'
// lock when locks is set.
func (s *Service) Loop(ctx context.Context, locks *lock.Locker, interval time.Duration) {
	for ctx.Err() == nil {
		var err error
		if locks == nil {
			_, err = s.RunDue(ctx)
		} else {
			err = locks.Run(ctx, runnerLock, runnerLockTTL, func(ctx context.Context) error {
				_, err := s.RunDue(ctx)
				return err
			})
		}
		if err != nil && !errors.Is(err, lock.ErrBusy) && ctx.Err() == nil {
			s.log.Warn("draw runner", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}
