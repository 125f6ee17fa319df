package inventory

import (
	"context"
	"time"
)

// available returns the live stock of each sku: from the instance's stock
// view where it has a trusted entry (no round trip; view.go), else read
// from Redis in one pipeline. It is 0 where no sale was seeded, and 0 for
// the SKUs not in the view with a logged warning when Redis fails (see the
// package doc).
func (s *Catalog) available(ctx context.Context, skus []string) []int64 {
	if len(skus) == 0 {
		return nil
	}
	out := make([]int64, len(skus))
	now := time.Now()
	var missing []int // indexes of skus to read from Redis
	var fills []*viewFill
	for i, sku := range skus {
		n, ok, f := s.view.lookup(sku, now)
		if ok {
			out[i] = max(n, 0)
			continue
		}
		missing = append(missing, i)
		fills = append(fills, f)
	}
	if len(missing) == 0 {
		return out
	}
	read := skus
	if len(missing) < len(skus) {
		read = make([]string, len(missing))
		for j, i := range missing {
			read[j] = skus[i]
		}
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	live, err := s.stock.Available(ctx, read...)
	if err != nil {
		s.log.WarnContext(ctx, "live stock unreadable; answering available 0", "err", err)
		return out
	}
	for j, i := range missing {
		s.view.fill(fills[j], live[j])
		out[i] = max(live[j], 0)
	}
	return out
}
