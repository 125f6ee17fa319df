package pickup

import (
	"context"
	"errors"
	"fmt"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/outage"
	"github.com/shop-oss/shop/internal/telemetry"
)

// Put creates or replaces a store (the caller has checked it): PostgreSQL,
// then the index. It returns a 503 error when PostgreSQL does not answer
// (nothing written), or when the index was not updated after the row was
// (a retry of the same Put converges).
func (s *Service) Put(ctx context.Context, st Store) (Store, error) {
	out, err := s.upsert(ctx, st)
	if err != nil {
		return Store{}, err
	}
	return out, s.reindex(ctx, st.ID)
}

// Delete removes a store from PostgreSQL, then from the index. It returns
// ErrNotFound, or a 503 error as Put does.
func (s *Service) Delete(ctx context.Context, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("delete store %q: %w", id, ErrNotFound)
	}
	err := s.remove(ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	// Also when the row is gone already: a retry after a 503 whose index
	// step failed must still clear the index.
	if ierr := s.reindex(ctx, id); ierr != nil {
		return ierr
	}
	return err
}

// reindex writes to the index what PostgreSQL holds for id now, not what
// this request wrote: two writes of one id racing each other then leave
// the index as the last committed one, unless a fresh read is overtaken by
// a slower one in flight (a window of one round trip; the index rebuild,
// at start or when missing, resets everything).
func (s *Service) reindex(ctx context.Context, id string) error {
	st, err := s.selectOne(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return s.indexDelete(ctx, id)
	case err != nil:
		return err
	}
	return s.indexPut(ctx, st)
}

// Get reads a store from PostgreSQL. It returns ErrNotFound or a 503 error.
func (s *Service) Get(ctx context.Context, id string) (Store, error) {
	if !ValidID(id) {
		return Store{}, fmt.Errorf("store %q: %w", id, ErrNotFound)
	}
	return s.selectOne(ctx, id)
}

// Nearby returns the stores within q.RadiusKm of the point, nearest first,
// at most q.Limit (the caller has checked q). A missing index is rebuilt
// first. It returns a 503 error when Redis or, for a rebuild, PostgreSQL
// does not answer.
func (s *Service) Nearby(ctx context.Context, q Query) ([]Nearby, error) {
	hits, err := s.search(ctx, q)
	if !errors.Is(err, errNotBuilt) {
		return hits, err
	}
	if err := s.ensureIndex(ctx); err != nil {
		return nil, err
	}
	hits, err = s.search(ctx, q)
	if errors.Is(err, errNotBuilt) {
		return nil, fmt.Errorf("nearby stores: %w", errRebuildRaced)
	}
	return hits, err
}

// ensureIndex rebuilds a missing index, waiting for an instance that is
// already at it (then finding it built).
func (s *Service) ensureIndex(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, indexWaitTimeout)
	defer cancel()
	err := s.locker.RunWait(ctx, lockName, lockTTL, func(ctx context.Context) error {
		built, err := s.indexWhole(ctx)
		if err != nil {
			return outage.Wrap("store index", errIndexDown, err)
		}
		if built {
			return nil
		}
		s.log.Info("pickup store index missing: rebuilding it from PostgreSQL")
		return s.rebuild(ctx)
	})
	var apiErr *apperr.Error
	switch {
	case errors.Is(err, lock.ErrBusy):
		return fmt.Errorf("nearby stores: %w: %w", errRebuildRaced, err)
	case err != nil && !errors.As(err, &apiErr):
		return outage.Wrap("nearby stores", errIndexDown, err) // the lock's Redis
	}
	return err
}

// RebuildIndex rebuilds the index from PostgreSQL under the lock (at
// start). It returns lock.ErrBusy when another instance is rebuilding it,
// or a 503 error.
func (s *Service) RebuildIndex(ctx context.Context) error {
	return s.locker.Run(ctx, lockName, lockTTL, func(ctx context.Context) error {
		// Traced only under the lock: another instance at it is no work.
		ctx, span := telemetry.Job(ctx, "pickup: rebuild store index")
		err := s.rebuild(ctx)
		telemetry.End(span, err)
		return err
	})
}
