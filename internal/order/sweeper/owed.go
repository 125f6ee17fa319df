package sweeper

import "context"

// The owed step: the releases a stop left unfinished of an order whose
// lines lie in several partitions of a cluster (internal/order's owed.go
// says how they come about and how an order's status settles them).

// finishOwed is the loop's owed step: SettleOwed, whose error is only
// logged (what it left is taken up again on the next round).
func (s *Sweeper) finishOwed(ctx context.Context) {
	if _, err := s.SettleOwed(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("order sweeper: owed releases", "err", err)
	}
}

// SettleOwed settles the spread orders of every partition's owed set whose
// time has come (by Redis's clock), batch by batch, each claimed for Lease
// as the due orders are, and returns how many entries it removed. On a
// single Redis there are none.
func (s *Sweeper) SettleOwed(ctx context.Context) (int, error) {
	parts := s.x.Partitions()
	if !parts.Grouped() {
		return 0, nil
	}
	settled := 0
	for p := range parts.Count() {
		for more := true; more; {
			n, m, err := s.ClaimEach(ctx, "order sweeper: settle owed releases", p, s.x.OwedKey(p),
				func(ctx context.Context, id string) (bool, error) { return s.x.SettleOwed(ctx, p, id) })
			settled, more = settled+n, m
			if err != nil {
				return settled, err
			}
		}
	}
	return settled, nil
}
