package saga

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
)

// On a Redis Cluster too, a draw's SKU is refused sale_not_active, alone
// and in a checkout across masters, and nothing is held or taken.
func TestDrawRoundIsNotSoldOnACluster(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	plain := f.skuIn(t, "plain", 1, 5)
	var drawSKU string
	for i := 0; drawSKU == ""; i++ {
		if sku := fmt.Sprintf("draw-%d", i); f.parts.Of(sku) == 9 {
			drawSKU = sku
		}
	}
	f.saleWith(t, drawSKU, 100, inventory.Seed{Quantity: 5, PerUserLimit: 1,
		Draw: &inventory.DrawSettings{ClosesAt: time.Now().Add(time.Hour)}})
	u := f.user(t)
	_, err := f.svc.Place(ctx, u, []order.Line{{SKU: drawSKU, Quantity: 1}}, order.PlaceOptions{})
	wantCode(t, err, apperr.CodeSaleNotActive)
	_, err = f.svc.Place(ctx, u, []order.Line{{SKU: plain, Quantity: 1}, {SKU: drawSKU, Quantity: 1}}, order.PlaceOptions{})
	wantCode(t, err, apperr.CodeSaleNotActive)
	f.wantAvailable(t, "after the refusals", map[string]int64{plain: 5, drawSKU: 5})
}
