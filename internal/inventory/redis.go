package inventory

import "context"

// available reads the live stock of each sku in one pipeline: 0 where no
// sale was seeded, and 0 for all with a logged warning when Redis fails
// (see the package doc).
func (s *Catalog) available(ctx context.Context, skus []string) []int64 {
	if len(skus) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	out, err := s.stock.Available(ctx, skus...)
	if err != nil {
		s.log.WarnContext(ctx, "live stock unreadable; answering available 0", "err", err)
		return make([]int64, len(skus))
	}
	for i := range out {
		out[i] = max(out[i], 0)
	}
	return out
}
