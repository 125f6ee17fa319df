package order

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/testenv"
)

type fixture struct {
	svc   *Service
	stock *inventory.Stock
	db    *testenv.Database
	r     *testenv.Redis
	// The writer's own connections, when a test routes them through a
	// proxy; nil: the fixture's.
	writerDB    *pgxpool.Pool
	writerRedis redis.UniversalClient
	rounds      ordertesting.Rounds // the rounds sale opened
	parts       keyspace.Partitions
}

func newFixture(t testing.TB) *fixture { return newPartitionedFixture(t, keyspace.Partitions{}) }

// newPartitionedFixture is a fixture whose orders go to parts.
func newPartitionedFixture(t testing.TB, parts keyspace.Partitions) *fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	stock := inventory.NewPartitionedStock(r.Client, r.Prefix, parts)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	exists := func(context.Context, string) (bool, error) { return false, nil }
	svc := New(db.Pool, r.Client, stock, exists, r.Prefix, log, prometheus.NewRegistry(), Options{})
	return &fixture{svc: svc, stock: stock, db: db, r: r, parts: parts}
}

// user and sale are ordertesting's User and OpenSale on the fixture's
// stores, remembering each round's SKU.
func (f *fixture) user(t testing.TB) string { return ordertesting.User(t, f.db.Pool) }
func (f *fixture) sale(t testing.TB, sku string, quantity, limit int, price int64) int64 {
	return f.rounds.Open(t, f.db.Pool, f.stock, f.r, sku, price, inventory.Seed{Quantity: quantity, PerUserLimit: limit})
}

func (f *fixture) place(t testing.TB, user, sku string, qty int) Placed {
	t.Helper()
	p, err := f.svc.Place(context.Background(), user, []Line{{SKU: sku, Quantity: qty}}, PlaceOptions{})
	if err != nil {
		t.Fatalf("place %s x%d: %v", sku, qty, err)
	}
	return p
}

func (f *fixture) writer(name string, o WriterOptions) Writer {
	o.Consumer = name
	o.Partitions = f.parts
	if o.Block == 0 {
		o.Block = 50 * time.Millisecond
	}
	db, rdb := ordertesting.Conns(f.db.Pool, f.writerDB, f.r.Client, f.writerRedis)
	return NewWriter(db, rdb, f.r.Prefix, f.svc.log, prometheus.NewRegistry(), o)
}

// start runs w in the background.
func start(w Writer) *ordertesting.Running { return ordertesting.Start(w.Run) }

// drained waits until every entry of every partition is acknowledged.
func (f *fixture) drained(t *testing.T) {
	t.Helper()
	ordertesting.Drained(t, f.r.Client, f.parts.Count(), f.svc.keys.Stream)
}

func (f *fixture) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	return ordertesting.Count(t, f.db.Pool, query, args...)
}

func (f *fixture) orderRows(t *testing.T) int64 {
	return f.count(t, `SELECT count(*) FROM orders`)
}

func (f *fixture) sold(t *testing.T, round int64) int64 {
	return ordertesting.Sold(t, f.db.Pool, f.stock, f.rounds.SKU(round), round)
}

// pendingCount is the entries delivered and not acknowledged, over every
// partition.
func (f *fixture) pendingCount(t *testing.T) int64 {
	t.Helper()
	return ordertesting.Pending(t, f.r.Client, f.parts.Count(), f.svc.keys.Stream, group)
}

// crashOnce returns a hook that fails the first call only.
var crashOnce = ordertesting.CrashOnce
