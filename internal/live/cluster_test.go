package live_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/shop-oss/shop/internal/apitest"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

// The application on a 3-master cluster (SHOP_REDIS_CLUSTER, SKU keys
// tagged by their partition): /readyz pings every master, the catalog
// reads live stock across masters, and a SKU's stock changes, published
// by the seed script on its master, reach the live stream's pattern
// subscription.
func TestLiveStockOnACluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	rdb, err := database.OpenCluster(context.Background(), c.URL, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	a := shoptest.New(t, shoptest.Options{Redis: rdb, Config: func(cfg *config.Config) {
		cfg.RedisCluster, cfg.KeyPrefix = true, c.Prefix
	}})
	if r := a.Do(t, http.MethodGet, "/readyz", "", ""); r.Status != http.StatusOK {
		t.Fatalf("readyz: %d %s", r.Status, r.Body)
	}
	base := a.Serve(t)
	slots := map[int64]bool{}
	for _, sku := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
		a.Sale(t, sku, 100, 5, 0)
		slots[c.Slot(t, a.Stock.SaleKey(sku))] = true
	}
	if len(slots) < 3 {
		t.Fatalf("6 SKUs in %d slots", len(slots))
	}
	avail, err := a.Stock.Available(context.Background(), "c1", "c2", "c3", "c4", "c5", "c6")
	if err != nil || len(avail) != 6 || avail[5] != 5 {
		t.Fatalf("available over the masters: %v %v", avail, err)
	}
	for _, sku := range []string{"c1", "c4", "c6"} {
		s := open(t, base, sku)
		if e := first(t, s); e.Available != 5 {
			t.Fatalf("%s: first event %+v", sku, e)
		}
		a.Round(t, sku, inventory.Seed{Quantity: 9})
		if _, ok := s.Until(wait, func(e apitest.StockEvent) bool { return e.Available == 9 }); !ok {
			t.Fatalf("%s: the new round was not streamed", sku)
		}
	}
}
