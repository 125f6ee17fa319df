package order

import "context"

// A placer reserves an order's lines and enqueues the order, all or
// nothing. New chooses one, once, from the stock's layout: scriptPlacer
// on a single Redis, sagaPlacer on a cluster. Both keep the contract that
// placer_test.go runs against each.
type placer interface {
	place(ctx context.Context, user string, lines []Line, o PlaceOptions) (reservation, error)
	// exists says whether the order an idempotency record names exists:
	// a replay answers only then.
	exists(ctx context.Context, id string) (bool, error)
}

// placerFor is the placer for s's partitions.
func placerFor(s *Service) placer {
	if s.keys.parts.Grouped() {
		return sagaPlacer{s}
	}
	return scriptPlacer{s}
}

// scriptPlacer places an order in one run of reserve.lua (reserve.go).
type scriptPlacer struct{ *Service }

func (p scriptPlacer) place(ctx context.Context, user string, lines []Line, o PlaceOptions) (reservation, error) {
	return p.placeOne(ctx, user, lines, o)
}

// exists: the script writes the idempotency record with the order.
func (scriptPlacer) exists(context.Context, string) (bool, error) { return true, nil }

// sagaPlacer places an order across a cluster's shards (saga.go).
type sagaPlacer struct{ *Service }

func (p sagaPlacer) place(ctx context.Context, user string, lines []Line, o PlaceOptions) (reservation, error) {
	return p.placeSaga(ctx, user, lines, o)
}

// exists: the record is claimed before the order exists, which it may
// never (refused, or aborted).
func (p sagaPlacer) exists(ctx context.Context, id string) (bool, error) {
	_, ok, err := p.liveStatus(ctx, id)
	return ok, err
}
