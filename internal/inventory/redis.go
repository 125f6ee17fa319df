package inventory

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// saleKey is the live sale state of a SKU, a hash kept by the flash-sale
// code; its field "available" is the live stock. The braces are a Redis
// Cluster hash tag: every key of one SKU's sale shares a slot.
func (s *Catalog) saleKey(sku string) string { return s.prefix + "sale:{" + sku + "}" }

// available reads the live stock of each sku in one pipeline: 0 where no
// sale was seeded, and 0 for all with a logged warning when Redis fails
// (see the package doc).
func (s *Catalog) available(ctx context.Context, skus []string) []int64 {
	out := make([]int64, len(skus))
	if len(skus) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(skus))
	for i, sku := range skus {
		cmds[i] = pipe.HGet(ctx, s.saleKey(sku), "available")
	}
	_, _ = pipe.Exec(ctx) // each command's own error is checked below
	var failed error
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			failed = err
		default:
			out[i] = max(n, 0)
		}
	}
	if failed != nil {
		s.log.WarnContext(ctx, "live stock unreadable; answering available 0", "err", failed)
	}
	return out
}
