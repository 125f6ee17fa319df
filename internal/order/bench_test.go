package order

import (
	"context"
	"testing"

	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// fillStream places n orders of sku, spread over users, from 32 goroutines.
func fillStream(b *testing.B, svc *Service, users []string, sku string, n int) {
	b.Helper()
	ordertesting.Fill(b, n, func(i int) error {
		_, err := svc.Place(context.Background(), users[i%len(users)], []Line{{SKU: sku, Quantity: 1}}, PlaceOptions{})
		return err
	})
}
