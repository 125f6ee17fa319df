package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/onetrip"
)

// productReadLua runs the cache's read of a product (KEYS 1..ARGV[1], no
// arguments of its own) as a local function with its own KEYS and ARGV,
// then reads the available units of the sale hash (the next key; the
// Live stock format in stock.go) and its buckets. It answers {the cache
// read's reply, available or false, buckets or false}.
const productReadLua = `local function document(KEYS, ARGV)
%s
end
local n = tonumber(ARGV[1])
local dk = {}
for i = 1, n do dk[i] = KEYS[i] end
local s = redis.call('HMGET', KEYS[n + 1], 'available', 'buckets')
return {document(dk, {}), s[1], s[2]}
`

// productReadTrip is a product read's one trip: the request's checks,
// then productReadLua. It reads keys only: its KEYS and ARGV are those
// getChecked passes.
var productReadTrip = onetrip.NewStep(fmt.Sprintf(productReadLua, cache.ReadLua()))

// getChecked is Get with its checks in the same call; ok is false when
// there are none, or they ran already, or Redis did not answer (the
// limiter lets a read through then): the caller reads on its own.
func (s *Catalog) getChecked(ctx context.Context, sku string, checks *onetrip.Checks) (p Product, ok bool, err error) {
	if checks == nil {
		return Product{}, false, nil
	}
	pre := s.cache.Prefetch(productKey(sku), nil)
	keys := append(pre.Keys(), s.stock.SaleKey(sku))
	reply, ran, err := checks.Run(ctx, productReadTrip, keys, []any{len(keys) - 1})
	if !ran || (err != nil && checks.Refusal() == nil) {
		return Product{}, false, nil
	}
	if err != nil {
		return Product{}, true, err
	}
	doc, available, bucketed, err := splitRead(reply)
	if err != nil {
		s.log.WarnContext(ctx, "product read script", "err", err)
		return Product{}, false, nil
	}
	if bucketed { // bucket 0's units are a share of the round's: sum them all
		available = s.available(ctx, []string{sku})[0]
	}
	rec, err := cache.GetJSONPrefetched(ctx, pre, doc, s.loadProduct(sku))
	if err != nil {
		return Product{}, true, s.getError(sku, err)
	}
	return rec.product(max(available, 0)), true, nil
}

// splitRead reads productReadLua's answer: the cache read's reply, the
// available units (0 where no sale was seeded) and whether the round is
// split over several stock buckets.
func splitRead(reply any) (doc any, available int64, bucketed bool, err error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 3 {
		return nil, 0, false, fmt.Errorf("product read: script answered %v", reply)
	}
	switch v := vals[1].(type) {
	case nil:
	case string:
		if available, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, 0, false, fmt.Errorf("product read: available %q: %w", v, err)
		}
	default:
		return nil, 0, false, fmt.Errorf("product read: script answered %v", reply)
	}
	b, _ := vals[2].(string) // nil: a round of one bucket
	return vals[0], available, b != "" && b != "1", nil
}

// loadProduct is the cache's loader of a product.
func (s *Catalog) loadProduct(sku string) func(context.Context) (record, error) {
	return func(ctx context.Context) (record, error) {
		r, err := s.selectProduct(ctx, sku)
		if errors.Is(err, ErrProductNotFound) {
			return r, cache.ErrNotFound
		}
		return r, err
	}
}

// getError maps the cache's answer to Get's errors.
func (s *Catalog) getError(sku string, err error) error {
	if errors.Is(err, cache.ErrNotFound) {
		return fmt.Errorf("get product %s: %w", sku, ErrProductNotFound)
	}
	return readError("get product "+sku, err)
}
