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
// Live stock format in stock.go). It answers {the cache read's reply,
// available or false}.
const productReadLua = `local function document(KEYS, ARGV)
%s
end
local n = tonumber(ARGV[1])
local dk = {}
for i = 1, n do dk[i] = KEYS[i] end
return {document(dk, {}), redis.call('HGET', KEYS[n + 1], 'available')}
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
	doc, available, err := splitRead(reply)
	if err != nil {
		s.log.WarnContext(ctx, "product read script", "err", err)
		return Product{}, false, nil
	}
	rec, err := cache.GetJSONPrefetched(ctx, pre, doc, s.loadProduct(sku))
	if err != nil {
		return Product{}, true, s.getError(sku, err)
	}
	return rec.product(max(available, 0)), true, nil
}

// splitRead reads productReadLua's answer: the cache read's reply and the
// available units (0 where no sale was seeded).
func splitRead(reply any) (doc any, available int64, err error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 2 {
		return nil, 0, fmt.Errorf("product read: script answered %v", reply)
	}
	switch v := vals[1].(type) {
	case nil:
		return vals[0], 0, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("product read: available %q: %w", v, err)
		}
		return vals[0], n, nil
	}
	return nil, 0, fmt.Errorf("product read: script answered %v", reply)
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
