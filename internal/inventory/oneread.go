package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/shop-oss/shop/internal/cache"
)

// A product read in one script call (issue 16; the composition and its
// reasons are in internal/shop/onetrip.go).
// More in docs/design/inventory.md ("oneread.go").

// ReadGate runs the checks a product read must pass and, when they pass,
// ProductReadLua, in one script call.
type ReadGate interface {
	// Read runs the checks and then ProductReadLua with keys and args.
	// ran is false when it could not (its checks had run already, or
	// Redis did not answer: the gate reports that failure itself): the
	// catalog then reads on its own. When it ran, err is the checks'
	// refusal, which answers the request (nothing was read), or reply is
	// the script's.
	Read(ctx context.Context, keys []string, args []any) (reply any, ran bool, err error)
}

// WithReadGate makes Get ask gate for each read's ReadGate (nil: none,
// the read makes its own round trips), given the request's context.
func WithReadGate(gate func(context.Context) ReadGate) CatalogOption {
	return func(s *Catalog) { s.gate = gate }
}

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

// ProductReadLua is the product read's script, for a ReadGate to run it
// inside its own script call. It reads keys only: its KEYS and ARGV are
// those Get passes the gate.
func ProductReadLua() string { return fmt.Sprintf(productReadLua, cache.ReadLua()) }

// getGated is Get through the request's ReadGate; ok is false when there
// is none or it did not run, and the caller reads as usual.
func (s *Catalog) getGated(ctx context.Context, sku string) (p Product, ok bool, err error) {
	if s.gate == nil {
		return Product{}, false, nil
	}
	g := s.gate(ctx)
	if g == nil {
		return Product{}, false, nil
	}
	pre := s.cache.Prefetch(productKey(sku), nil)
	keys := append(pre.Keys(), s.stock.SaleKey(sku))
	reply, ran, err := g.Read(ctx, keys, []any{len(keys) - 1})
	if !ran {
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
