package shoptest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/saga"
	"github.com/shop-oss/shop/internal/testenv"
)

// ClusterSale is a sale on a private 3-master Redis Cluster with 6 order
// partitions grouped as serve groups them, the stock seeded through
// inventory: SKUs[p] are partition p's two SKUs, each opened with the
// units NewClusterSale was given. It is the stores only: the tests that
// use it build the order service, writer, audit and recovery on them.
type ClusterSale struct {
	RDB    *redis.ClusterClient
	DB     *testenv.Database
	Prefix string
	Parts  keyspace.Partitions
	Stock  *inventory.Stock
	SKUs   [][]string
	Log    *slog.Logger
}

// NewClusterSale starts the cluster and opens the sales: SKUs named
// skuPrefix-0, skuPrefix-1, … until every partition has two.
func NewClusterSale(t testing.TB, skuPrefix string, units int) *ClusterSale {
	t.Helper()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	s := &ClusterSale{RDB: rdb, DB: testenv.NewDatabase(t), Prefix: c.Prefix, Parts: keyspace.NewPartitions(6, true),
		Log: slog.New(slog.DiscardHandler)}
	if err := orderkey.SettlePartitions(ctx, rdb, s.Prefix, s.Parts); err != nil {
		t.Fatal(err)
	}
	s.Stock = inventory.NewPartitionedStock(rdb, s.Prefix, s.Parts)
	sales := inventory.NewSales(s.DB.Pool, s.Stock)
	s.SKUs = make([][]string, s.Parts.Count())
	for i := 0; slices.ContainsFunc(s.SKUs, func(x []string) bool { return len(x) < 2 }); i++ {
		sku := fmt.Sprintf("%s-%d", skuPrefix, i)
		p := s.Parts.Of(sku)
		if len(s.SKUs[p]) == 2 {
			continue
		}
		s.Exec(t, `INSERT INTO products (sku, name, category, price_cents) VALUES ($1, $1, 'c', 100)`, sku)
		if _, err := sales.Open(ctx, sku, inventory.Seed{Quantity: units}); err != nil {
			t.Fatal(err)
		}
		s.SKUs[p] = append(s.SKUs[p], sku)
	}
	return s
}

// Exec runs sql on the sale's database.
func (s *ClusterSale) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := s.DB.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// User adds a user and returns its id.
func (s *ClusterSale) User(t testing.TB) string {
	id := uuid.NewString()
	s.Exec(t, `INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, id, id+"@example.com")
	return id
}

// Orders is the order package's service on the sale's stores (every user
// exists), placing with the saga (a default one unless o names one).
func (s *ClusterSale) Orders(o order.Options) *order.Service {
	if o.Placer == nil {
		o.Placer = saga.New(saga.Options{}).On
	}
	exists := func(context.Context, string) (bool, error) { return true, nil }
	return order.New(s.DB.Pool, s.RDB, s.Stock, exists, s.Prefix, s.Log, prometheus.NewRegistry(), o)
}

// Drained waits until every partition's entries are written and acked.
func (s *ClusterSale) Drained(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	keys := ledger.New(s.RDB, s.Prefix, s.Parts).Partitions()
	deadline := time.Now().Add(60 * time.Second)
	for p := 0; p < len(keys); {
		if time.Now().After(deadline) {
			t.Fatalf("partition %d not drained within 60s", p)
		}
		groups, err := s.RDB.XInfoGroups(ctx, keys[p].Stream).Result()
		if err == nil && len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0 {
			p++
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// OnCluster is the application on cluster c (SHOP_REDIS_CLUSTER, the
// cluster's key prefix), through rdb, or a client of the cluster's own
// when rdb is nil; cfg, when set, edits the configuration further.
func OnCluster(t testing.TB, c *testenv.RedisCluster, rdb redis.UniversalClient, cfg func(*config.Config)) *App {
	t.Helper()
	if rdb == nil {
		rdb = testenv.OpenCluster(t, c)
	}
	return New(t, Options{Redis: rdb, Config: func(conf *config.Config) {
		conf.RedisCluster, conf.KeyPrefix = true, c.Prefix
		if cfg != nil {
			cfg(conf)
		}
	}})
}
