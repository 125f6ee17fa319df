package order

import (
	"fmt"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// On a cluster a partition's stream, due set and dead letters share the
// slot of every SKU in it (CLUSTER KEYSLOT, over the real key functions).
// The writer's per-partition work on them: internal/order/writer's
// TestWriterStreamsOnACluster.
func TestPartitionKeysOnACluster(t *testing.T) {
	t.Parallel()
	c, rdb, parts := ordertesting.Cluster(t, 6)
	stock := inventory.NewPartitionedStock(rdb, c.Prefix, parts)
	k := orderkey.New(c.Prefix, parts)
	for i := range 30 {
		sku := fmt.Sprintf("sku-%d", i)
		p := parts.Of(sku)
		want := c.Slot(t, stock.SaleKey(sku))
		for _, key := range []string{k.Stream(p), k.Due(p), k.Dead(p), stock.BuyersKey(sku), stock.ReleasedKey(sku),
			k.Holds(p), k.Hold(p, "01a232c2-00db-7cbc-85b3-7b9f303d4d05"), k.Settled(p), k.Owed(p), k.Releases(p)} {
			if got := c.Slot(t, key); got != want {
				t.Fatalf("%s: slot %d, want %d (%s's)", key, got, want, sku)
			}
		}
	}
}
