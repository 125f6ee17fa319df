package inventory

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// OnSale is one SKU's current round, for the metrics.
type OnSale struct {
	SKU                 string
	Quantity, Available int64
}

// currentSKUsSQL: each SKU's latest round, if its window has not ended.
// Bounded, since it runs on every scrape.
const currentSKUsSQL = `
SELECT sku FROM (SELECT DISTINCT ON (sku) sku, ends_at FROM sale_rounds ORDER BY sku, id DESC) r
WHERE ends_at IS NULL OR ends_at > now() - interval '1 hour'
ORDER BY sku LIMIT 1000`

// OnSale reads the seeded quantity and the live available units of every
// SKU whose latest round has not ended (or ended within the hour, so a
// dashboard sees the end): PostgreSQL names the SKUs, Redis holds the
// counts.
func (s *Sales) OnSale(ctx context.Context) ([]OnSale, error) {
	rows, err := s.db.Query(ctx, currentSKUsSQL)
	if err != nil {
		return nil, fmt.Errorf("rounds on sale: %w", err)
	}
	skus, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("rounds on sale: %w", err)
	}
	return s.stock.onSale(ctx, skus)
}

// onSale reads each SKU's live round's quantity and available units in
// one pipeline (and a second for each round of several buckets), leaving
// out SKUs without a live round.
func (s *Stock) onSale(ctx context.Context, skus []string) ([]OnSale, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(skus))
	for i, sku := range skus {
		cmds[i] = pipe.HMGet(ctx, s.SaleKey(sku), "round", "quantity", "available", "buckets")
	}
	if len(skus) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("live stock: %w", err)
		}
	}
	out := make([]OnSale, 0, len(skus))
	for i, c := range cmds {
		v := c.Val()
		if v[0] == nil {
			continue // no live round
		}
		num := func(x any) int64 { s, _ := x.(string); n, _ := strconv.ParseInt(s, 10, 64); return n }
		available := []int64{num(v[2])}
		// A round of several buckets: bucket 0 holds a share of its units.
		if err := s.sumBuckets(ctx, skus[i], int(num(v[3])), available, "available"); err != nil {
			return nil, fmt.Errorf("live stock: %w", err)
		}
		out = append(out, OnSale{SKU: skus[i], Quantity: num(v[1]), Available: available[0]})
	}
	return out, nil
}
