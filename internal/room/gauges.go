package room

import (
	"context"
	"errors"
)

// RoomCount is one tracked room's counters, for the metrics.
type RoomCount struct {
	SKU               string
	Round             int64
	Waiting, Admitted int64
}

// Tracked reads the counters of every room the admitter tracks: the live
// ones and those over but not yet recorded. A room whose counters cannot
// be read is left out, and its error joins err.
func (s *Service) Tracked(ctx context.Context) ([]RoomCount, error) {
	rooms, err := s.tracked(ctx)
	if err != nil {
		return nil, storeError("index", err)
	}
	out := make([]RoomCount, 0, len(rooms))
	var errs error
	for _, t := range rooms {
		waiting, admitted, err := s.Counters(ctx, t.sku, t.round)
		if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		out = append(out, RoomCount{SKU: t.sku, Round: t.round, Waiting: waiting, Admitted: admitted})
	}
	return out, errs
}
