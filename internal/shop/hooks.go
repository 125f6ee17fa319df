package shop

import (
	"context"

	"github.com/shop-oss/shop/internal/bestseller"
	"github.com/shop-oss/shop/internal/order"
)

// BestSellerOrders are persisted orders as the best-seller boards take
// them: the order id (what makes counting idempotent), its creation time
// (what picks the periods) and its units per SKU.
func BestSellerOrders(ps []order.Persisted) []bestseller.Order {
	out := make([]bestseller.Order, len(ps))
	for i, p := range ps {
		lines := make([]bestseller.Line, len(p.Items))
		for j, it := range p.Items {
			lines[j] = bestseller.Line{SKU: it.SKU, Units: int64(it.Quantity)}
		}
		out[i] = bestseller.Order{ID: p.ID, At: p.CreatedAt, Lines: lines}
	}
	return out
}

// AfterCommit is the order writer's after-commit hook: each order it
// inserted counts on the best-seller boards (once: the boards mark order
// ids, so a retried hook counts nothing twice).
func AfterCommit(boards *bestseller.Service) func(context.Context, []order.Persisted) error {
	return func(ctx context.Context, ps []order.Persisted) error {
		_, err := boards.Record(ctx, BestSellerOrders(ps))
		return err
	}
}
