package saga

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/order/sweeper"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/testenv"
)

// fixture is an order service on the test's own Redis and PostgreSQL,
// placing with one script; a clusterFixture's places with the saga.
type fixture struct {
	svc  *order.Service
	saga *Placer // nil: the one-script placer
	// store is the service's Redis, ledger its order keys.
	store  redis.UniversalClient
	ledger *ledger.Ledger
	stock  *inventory.Stock
	db     *testenv.Database
	r      *testenv.Redis
	log    *slog.Logger
	exists order.ProductExists
	parts  keyspace.Partitions
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	stock := inventory.NewPartitionedStock(r.Client, r.Prefix, keyspace.Partitions{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	exists := func(context.Context, string) (bool, error) { return false, nil }
	svc := order.New(db.Pool, r.Client, stock, exists, r.Prefix, log, prometheus.NewRegistry(), order.Options{})
	return &fixture{svc: svc, stock: stock, store: r.Client, ledger: ledger.New(r.Client, r.Prefix, keyspace.Partitions{}),
		db: db, r: r, log: log, exists: exists}
}

// user, sale and saleWith are ordertesting's User, OpenSale and
// OpenSaleWith on the fixture's stores.
func (f *fixture) user(t testing.TB) string { return ordertesting.User(t, f.db.Pool) }
func (f *fixture) sale(t testing.TB, sku string, quantity, limit int, price int64) int64 {
	return ordertesting.OpenSale(t, f.db.Pool, f.stock, f.r, sku, quantity, limit, price)
}
func (f *fixture) saleWith(t testing.TB, sku string, price int64, seed inventory.Seed) int64 {
	return ordertesting.OpenSaleWith(t, f.db.Pool, f.stock, f.r, sku, price, seed)
}

func (f *fixture) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	return ordertesting.Count(t, f.db.Pool, query, args...)
}

// writerOn is the order writer of the orders under prefix on rdb.
func (f *fixture) writerOn(rdb redis.UniversalClient, prefix string, o writer.Options) *writer.Writer {
	o.Partitions = f.parts
	return writer.New(f.db.Pool, rdb, prefix, f.log, prometheus.NewRegistry(), o)
}

// start runs w in the background.
func start(w *writer.Writer) *ordertesting.Running { return ordertesting.Start(w.Run) }

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error = %v, want %s", err, code)
	}
}

// clusterFixture is a fixture whose stock and orders live on a private
// 3-master Redis Cluster, 12 partitions grouped as serve groups them (the
// catalog, which the sales need, stays on the fixture's single Redis).
type clusterFixture struct {
	*fixture
	c   *testenv.RedisCluster
	rdb *redis.ClusterClient
}

func newClusterFixture(t *testing.T) *clusterFixture {
	t.Helper()
	c, rdb, parts := ordertesting.Cluster(t, 12)
	f := newFixture(t)
	f.parts = parts
	f.stock = inventory.NewPartitionedStock(rdb, c.Prefix, f.parts)
	f.store, f.ledger = rdb, ledger.New(rdb, c.Prefix, parts)
	x := &clusterFixture{fixture: f, c: c, rdb: rdb}
	f.svc, f.saga = x.service(Options{}, order.Options{})
	return x
}

// service is an order service on the cluster placing with a saga of o.
func (f *clusterFixture) service(o Options, oo order.Options) (*order.Service, *Placer) {
	p := New(o)
	oo.Placer = p.On
	return order.New(f.db.Pool, f.rdb, f.stock, f.exists, f.c.Prefix, f.log, prometheus.NewRegistry(), oo), p
}

// sweeper is the order sweeper with the saga repair of o.
func (f *clusterFixture) sweeper(o RepairOptions) *sweeper.Sweeper {
	log := slog.New(slog.DiscardHandler)
	return sweeper.New(f.rdb, f.stock, f.c.Prefix, log, prometheus.NewRegistry(),
		sweeper.Options{Sagas: NewRepair(f.rdb, f.stock, f.c.Prefix, log, o)})
}

// writer is a writer of the cluster's orders, blocking 20ms.
func (f *clusterFixture) writer() *writer.Writer {
	return f.writerOn(f.rdb, f.c.Prefix, writer.Options{Consumer: "w", Block: 20 * time.Millisecond})
}

func (f *fixture) available(t *testing.T, sku string) int64 {
	t.Helper()
	return ordertesting.Available(t, f.stock, sku)
}

// wantAvailable fails t, saying when, unless each SKU has the units
// available that want gives it.
func (f *fixture) wantAvailable(t *testing.T, when string, want map[string]int64) {
	t.Helper()
	for sku, n := range want {
		if av := f.available(t, sku); av != n {
			t.Fatalf("%s %s available %d, want %d", when, sku, av, n)
		}
	}
}

func (f *fixture) place(t testing.TB, user, sku string, qty int) order.Placed {
	t.Helper()
	p, err := f.svc.Place(context.Background(), user, []order.Line{{SKU: sku, Quantity: qty}}, order.PlaceOptions{})
	if err != nil {
		t.Fatalf("place %s x%d: %v", sku, qty, err)
	}
	return p
}

// home is the home partition order id's status names.
func (f *clusterFixture) home(t *testing.T, id string) int {
	t.Helper()
	p, _ := ledger.StatusHash(f.rdb.HGetAll(context.Background(), f.saga.keys.Status(id)).Val()).Home()
	return p
}
