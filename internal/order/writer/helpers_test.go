package writer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/testenv"
)

type fixture struct {
	svc   *order.Service
	log   *slog.Logger
	keys  keys // the order package's key names, as the writer sees them
	stock *inventory.Stock
	db    *testenv.Database
	r     *testenv.Redis
	// The writer's own connections, when a test routes them through a
	// proxy; nil: the fixture's.
	writerDB    *pgxpool.Pool
	writerRedis redis.UniversalClient
	skus        map[int64]string // round id -> sku, of the rounds sale opened
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
	svc := order.New(db.Pool, r.Client, stock, exists, r.Prefix, log, prometheus.NewRegistry(), order.Options{})
	return &fixture{svc: svc, log: log, keys: newKeys(r.Prefix, parts), stock: stock, db: db, r: r,
		skus: map[int64]string{}, parts: parts}
}

// user inserts a user row (orders reference users) and returns its id.
func (f *fixture) user(t testing.TB) string {
	t.Helper()
	id := uuid.NewString()
	_, err := f.db.Pool.Exec(context.Background(),
		`INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, id, id+"@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// sale creates a product and opens a sale round for it through inventory,
// which owns both; it returns the round id.
func (f *fixture) sale(t testing.TB, sku string, quantity, limit int, price int64) int64 {
	t.Helper()
	round := openSale(t, f.db.Pool, f.stock, f.r, sku, quantity, limit, price)
	f.skus[round] = sku
	return round
}

// openSale creates the product sku at price and opens a round of quantity
// units (limit per user) for it.
func openSale(tb testing.TB, db *pgxpool.Pool, stock *inventory.Stock, r *testenv.Redis, sku string, quantity, limit int, price int64) int64 {
	tb.Helper()
	ctx := context.Background()
	c := cache.New(r.Client, cache.Options{Prefix: r.Prefix + "cache:", TTL: time.Minute}, prometheus.NewRegistry())
	catalog := inventory.NewCatalog(db, r.Client, c, r.Prefix, slog.New(slog.DiscardHandler))
	if _, err := catalog.Create(ctx, sku, inventory.ProductInput{Name: sku, Category: "c", PriceCents: price}); err != nil {
		tb.Fatalf("create %s: %v", sku, err)
	}
	rep, err := inventory.NewSales(db, stock).Open(ctx, sku, inventory.Seed{Quantity: quantity, PerUserLimit: limit})
	if err != nil {
		tb.Fatalf("open sale of %s: %v", sku, err)
	}
	return *rep.RoundID
}

func (f *fixture) place(t testing.TB, user, sku string, qty int) order.Placed {
	t.Helper()
	p, err := f.svc.Place(context.Background(), user, []order.Line{{SKU: sku, Quantity: qty}}, order.PlaceOptions{})
	if err != nil {
		t.Fatalf("place %s x%d: %v", sku, qty, err)
	}
	return p
}

func (f *fixture) writer(name string, o Options) *Writer {
	o.Consumer = name
	o.Partitions = f.parts
	if o.Block == 0 {
		o.Block = 50 * time.Millisecond
	}
	db, rdb := f.db.Pool, redis.UniversalClient(f.r.Client)
	if f.writerDB != nil {
		db = f.writerDB
	}
	if f.writerRedis != nil {
		rdb = f.writerRedis
	}
	return New(db, rdb, f.r.Prefix, f.log, prometheus.NewRegistry(), o)
}

// running is a writer running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(w *Writer) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("writer did not stop")
	}
}

// drained waits until every entry of every partition is acknowledged.
func (f *fixture) drained(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for p := 0; p < f.parts.Count(); {
		if time.Now().After(deadline) {
			t.Fatalf("partition %d not drained within 30s", p)
		}
		groups, err := f.r.Client.XInfoGroups(ctx, f.keys.stream(p)).Result()
		if err == nil && len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0 {
			p++
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := f.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (f *fixture) orderRows(t *testing.T) int64 {
	return f.count(t, `SELECT count(*) FROM orders`)
}

func (f *fixture) sold(t *testing.T, round int64) int64 {
	rep, err := inventory.NewSales(f.db.Pool, f.stock).Report(context.Background(), f.skus[round])
	if err != nil || *rep.RoundID != round {
		t.Fatalf("stock report of round %d: %+v %v", round, rep, err)
	}
	return rep.Confirmed
}

// pendingCount is the entries delivered and not acknowledged, over every
// partition.
func (f *fixture) pendingCount(t *testing.T) int64 {
	t.Helper()
	var n int64
	for k := range f.parts.Count() {
		p, err := f.r.Client.XPending(context.Background(), f.keys.stream(k), group).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += p.Count
	}
	return n
}

// crashOnce returns a hook that fails the first call only.
func crashOnce() func() error {
	var once sync.Once
	return func() (err error) {
		once.Do(func() { err = fmt.Errorf("simulated crash") })
		return err
	}
}
