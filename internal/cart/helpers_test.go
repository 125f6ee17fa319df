package cart

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/testenv"
)

// fixture is the cart service on real stores, with the real catalog, sale
// rounds and order service around it.
type fixture struct {
	svc     *Service
	catalog *inventory.Catalog
	sales   *inventory.Sales
	stock   *inventory.Stock
	orders  *order.Service
	db      *testenv.Database
	r       *testenv.Redis
	reg     *prometheus.Registry
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	c := cache.New(r.Client, cache.Options{Prefix: r.Prefix + "cache:", TTL: time.Minute, Jitter: 0.1}, reg)
	catalog := inventory.NewCatalog(db.Pool, r.Client, c, r.Prefix, log)
	stock := inventory.NewStock(r.Client, r.Prefix)
	orders := order.New(db.Pool, r.Client, stock, catalog.Exists, r.Prefix, log, reg, order.Options{})
	return &fixture{
		svc:     New(r.Client, catalog, orders, r.Prefix, log, reg),
		catalog: catalog, sales: inventory.NewSales(db.Pool, stock), stock: stock, orders: orders,
		db: db, r: r, reg: reg,
	}
}

// product creates a catalog product.
func (f *fixture) product(t testing.TB, sku string, price int64) {
	t.Helper()
	_, err := f.catalog.Create(context.Background(), sku, inventory.ProductInput{Name: "Product " + sku, Category: "c", PriceCents: price})
	if err != nil {
		t.Fatalf("create %s: %v", sku, err)
	}
}

// sale creates a product and opens a sale round of quantity units for it
// (limit per user, 0 = unlimited); it returns the round id.
func (f *fixture) sale(t *testing.T, sku string, price int64, quantity, limit int) int64 {
	t.Helper()
	f.product(t, sku, price)
	rep, err := f.sales.Open(context.Background(), sku, inventory.Seed{Quantity: quantity, PerUserLimit: limit})
	if err != nil {
		t.Fatalf("open sale of %s: %v", sku, err)
	}
	return *rep.RoundID
}

// user inserts a user row (orders reference users) and returns its id.
func (f *fixture) user(t *testing.T) string {
	t.Helper()
	id := uuid.NewString()
	_, err := f.db.Pool.Exec(context.Background(),
		`INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, id, id+"@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) add(t *testing.T, user, sku string, qty int) Cart {
	t.Helper()
	c, err := f.svc.Add(context.Background(), user, sku, qty)
	if err != nil {
		t.Fatalf("add %s x%d: %v", sku, qty, err)
	}
	return c
}

// hash is the cart's Redis hash as stored.
func (f *fixture) hash(t testing.TB, user string) map[string]string {
	t.Helper()
	m, err := f.r.Client.HGetAll(context.Background(), f.svc.key(user)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) available(t *testing.T, sku string) int64 {
	t.Helper()
	a, err := f.stock.Available(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a[0]
}

func (f *fixture) streamLen(t *testing.T) int64 {
	t.Helper()
	return f.r.Client.XLen(context.Background(), f.r.Prefix+"orders").Val()
}

func (f *fixture) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := f.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// drain runs an order writer until every stream entry is written and
// acknowledged.
func (f *fixture) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := writer.New(f.db.Pool, f.r.Client, f.r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(),
		writer.Options{Consumer: "w", Block: 50 * time.Millisecond})
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		groups, err := f.r.Client.XInfoGroups(context.Background(), f.r.Prefix+"orders").Result()
		if err == nil && len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("order stream not drained within 30s")
}

// metric reads one counter of the fixture's registry (0 when absent).
func (f *fixture) metric(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// wantCode fails unless err is an *apperr.Error with the code.
func wantCode(t *testing.T, err error, code string) *apperr.Error {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	return e
}
