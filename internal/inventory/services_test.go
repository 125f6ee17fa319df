package inventory_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/testenv"
)

// services are the catalog, the sales and the live stock on a test's own
// PostgreSQL and Redis, called directly: the tests of how their writes
// order themselves. Tests through the whole application (HTTP, the near
// cache, other instances) are internal/shop/catalogtest's.
type services struct {
	Catalog *inventory.Catalog
	Sales   *inventory.Sales
	stock   *inventory.Stock
	db      *testenv.Database
}

func newServices(t *testing.T) *services {
	t.Helper()
	db, r := testenv.NewDatabase(t), testenv.NewRedis(t)
	c := cache.New(r.Client, cache.Options{Prefix: r.Prefix + "cache:", TTL: time.Minute}, prometheus.NewRegistry())
	stock := inventory.NewStock(r.Client, r.Prefix)
	return &services{
		Catalog: inventory.NewCatalogOn(db.Pool, stock, c, slog.New(slog.DiscardHandler), inventory.CatalogOptions{}),
		Sales:   inventory.NewSales(db.Pool, stock),
		stock:   stock,
		db:      db,
	}
}

func (s *services) create(t *testing.T, sku, category string, price int64) {
	t.Helper()
	if _, err := s.Catalog.Create(context.Background(), sku, inventory.ProductInput{Name: sku, Category: category, PriceCents: price}); err != nil {
		t.Fatalf("create %s: %v", sku, err)
	}
}

func (s *services) seed(t *testing.T, sku string, quantity int) {
	t.Helper()
	if _, err := s.Sales.Open(context.Background(), sku, inventory.Seed{Quantity: quantity}); err != nil {
		t.Fatalf("seed %s: %v", sku, err)
	}
}
