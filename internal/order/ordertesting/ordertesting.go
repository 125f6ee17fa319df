// Package ordertesting holds the fixture code that the tests of
// internal/order and its saga and writer share: rows and sales they set
// up through the packages that own them, a writer run in the background,
// and the checks they make of the database and the streams. It imports
// nothing of internal/order, so that all their tests may import it.
package ordertesting

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
	"github.com/shop-oss/shop/internal/testenv"
)

// User inserts a user row (orders reference users) and returns its id.
func User(tb testing.TB, db *pgxpool.Pool) string {
	tb.Helper()
	id := uuid.NewString()
	_, err := db.Exec(context.Background(),
		`INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, id, id+"@example.com")
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// OpenSale creates the product sku at price and opens a round of quantity
// units (limit per user) for it, through inventory, which owns both; it
// returns the round id.
func OpenSale(tb testing.TB, db *pgxpool.Pool, stock *inventory.Stock, r *testenv.Redis, sku string, quantity, limit int, price int64) int64 {
	tb.Helper()
	return OpenSaleWith(tb, db, stock, r, sku, price, inventory.Seed{Quantity: quantity, PerUserLimit: limit})
}

// OpenSaleWith is OpenSale of any seed (a waiting room's, say).
func OpenSaleWith(tb testing.TB, db *pgxpool.Pool, stock *inventory.Stock, r *testenv.Redis, sku string, price int64, seed inventory.Seed) int64 {
	tb.Helper()
	ctx := context.Background()
	c := cache.New(r.Client, cache.Options{Prefix: r.Prefix + "cache:", TTL: time.Minute}, prometheus.NewRegistry())
	catalog := inventory.NewCatalog(db, r.Client, c, r.Prefix, slog.New(slog.DiscardHandler))
	if _, err := catalog.Create(ctx, sku, inventory.ProductInput{Name: sku, Category: "c", PriceCents: price}); err != nil {
		tb.Fatalf("create %s: %v", sku, err)
	}
	rep, err := inventory.NewSales(db, stock).Open(ctx, sku, seed)
	if err != nil {
		tb.Fatalf("open sale of %s: %v", sku, err)
	}
	return *rep.RoundID
}

// Conns are the connections a writer uses: db and rdb, each unless its
// override (a test's proxied connection) is set.
func Conns(db, overDB *pgxpool.Pool, rdb, overRedis redis.UniversalClient) (*pgxpool.Pool, redis.UniversalClient) {
	if overDB != nil {
		db = overDB
	}
	if overRedis != nil {
		rdb = overRedis
	}
	return db, rdb
}

// Running is a writer running in the background.
type Running struct {
	cancel context.CancelFunc
	done   chan error
}

// Start runs run in the background until Stop.
func Start(run func(context.Context) error) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- run(ctx) }()
	return r
}

// Stop cancels the run and fails t unless it returns nil within 20s.
func (r *Running) Stop(t testing.TB) {
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

// Drained waits until every entry of every one of n partitions, whose
// streams stream names, is acknowledged.
func Drained(t testing.TB, rdb redis.UniversalClient, n int, stream func(int) string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for p := 0; p < n; {
		if time.Now().After(deadline) {
			t.Fatalf("partition %d not drained within 30s", p)
		}
		groups, err := rdb.XInfoGroups(ctx, stream(p)).Result()
		if err == nil && len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0 {
			p++
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Count is the one integer query returns.
func Count(t testing.TB, db *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Sold is the units of round (of sku) confirmed sold, as inventory
// reports them.
func Sold(t testing.TB, db *pgxpool.Pool, stock *inventory.Stock, sku string, round int64) int64 {
	rep, err := inventory.NewSales(db, stock).Report(context.Background(), sku)
	if err != nil || *rep.RoundID != round {
		t.Fatalf("stock report of round %d: %+v %v", round, rep, err)
	}
	return rep.Confirmed
}

// Pending is the entries delivered to group and not acknowledged, over
// every one of n partitions, whose streams stream names.
func Pending(t testing.TB, rdb redis.UniversalClient, n int, stream func(int) string, group string) int64 {
	t.Helper()
	var sum int64
	for k := range n {
		p, err := rdb.XPending(context.Background(), stream(k), group).Result()
		if err != nil {
			t.Fatal(err)
		}
		sum += p.Count
	}
	return sum
}

// CrashOnce returns a hook that fails the first call only.
func CrashOnce() func() error {
	var once sync.Once
	return func() (err error) {
		once.Do(func() { err = fmt.Errorf("simulated crash") })
		return err
	}
}

// Users inserts n users (orders reference them) and returns their ids.
func Users(tb testing.TB, db *pgxpool.Pool, n int) []string {
	tb.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = User(tb, db)
	}
	return ids
}

// Fill calls place for every i below n, from 32 goroutines, and fails tb
// with the first error.
func Fill(tb testing.TB, n int, place func(i int) error) {
	tb.Helper()
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := place(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
}

// Bench is what a benchmark of the orders starts from: a database, Redis,
// the stock, 100 buyers and an open round of a SKU with units to spare.
type Bench struct {
	DB    *testenv.Database
	R     *testenv.Redis
	Stock *inventory.Stock
	Users []string
	Round int64
}

// NewBench opens a round of 1<<30 units of sku at 100 cents, without a
// limit per buyer, for 100 new buyers.
func NewBench(b *testing.B, sku string) *Bench {
	b.Helper()
	db, r := testenv.NewDatabase(b), testenv.NewRedis(b)
	stock := inventory.NewStock(r.Client, r.Prefix)
	users := Users(b, db.Pool, 100)
	round := OpenSale(b, db.Pool, stock, r, sku, 1<<30, 0, 100)
	return &Bench{DB: db, R: r, Stock: stock, Users: users, Round: round}
}

// Env is what a fixture of the orders stands on: a database, Redis, the
// stock of orders that go to Parts, and the rounds Sale opened.
type Env struct {
	DB    *testenv.Database
	R     *testenv.Redis
	Stock *inventory.Stock
	Log   *slog.Logger
	Parts keyspace.Partitions
	// The writer's own connections, when a test routes them through a
	// proxy; nil: the fixture's.
	WriterDB    *pgxpool.Pool
	WriterRedis redis.UniversalClient
	Skus        map[int64]string // round id -> sku, of the rounds Sale opened
}

// NewEnv is an Env whose orders go to parts.
func NewEnv(t testing.TB, parts keyspace.Partitions) *Env {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	return &Env{DB: db, R: r, Stock: inventory.NewPartitionedStock(r.Client, r.Prefix, parts),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Parts: parts, Skus: map[int64]string{}}
}

// User inserts a user row (orders reference users) and returns its id.
func (e *Env) User(t testing.TB) string {
	t.Helper()
	return User(t, e.DB.Pool)
}

// Sale creates a product and opens a sale round for it through inventory,
// which owns both; it returns the round id.
func (e *Env) Sale(t testing.TB, sku string, quantity, limit int, price int64) int64 {
	t.Helper()
	round := OpenSale(t, e.DB.Pool, e.Stock, e.R, sku, quantity, limit, price)
	e.Skus[round] = sku
	return round
}

// Conns are the connections a writer uses.
func (e *Env) Conns() (*pgxpool.Pool, redis.UniversalClient) {
	return Conns(e.DB.Pool, e.WriterDB, e.R.Client, e.WriterRedis)
}

// Count is the one integer query returns.
func (e *Env) Count(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	return Count(t, e.DB.Pool, query, args...)
}

// OrderRows is the rows of the orders table.
func (e *Env) OrderRows(t testing.TB) int64 {
	return e.Count(t, `SELECT count(*) FROM orders`)
}

// Sold is the units of round confirmed sold.
func (e *Env) Sold(t testing.TB, round int64) int64 {
	return Sold(t, e.DB.Pool, e.Stock, e.Skus[round], round)
}

// Cluster starts a Redis cluster of three masters and returns it, a
// client of it, and n partitions spread over its masters.
func Cluster(t testing.TB, n int) (*testenv.RedisCluster, *redis.ClusterClient, keyspace.Partitions) {
	t.Helper()
	c := testenv.StartCluster(t, 3)
	return c, testenv.OpenCluster(t, c), keyspace.NewPartitions(n, true)
}

// Available is the units of sku's live round still for sale.
func Available(t testing.TB, stock *inventory.Stock, sku string) int64 {
	t.Helper()
	live, _, err := stock.Live(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return live.Available
}

// Together runs every op in a goroutine of its own, all released at
// once, and waits for them all.
func Together(ops ...func()) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			op()
		}()
	}
	close(start)
	wg.Wait()
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Rounds remembers the SKU of each sale round a test opened, for the
// checks that go by round (Sold); a test may open sales in parallel. The
// zero value is ready.
type Rounds struct {
	mu   sync.Mutex
	skus map[int64]string
}

// Open is OpenSaleWith, remembering the round's SKU.
func (rs *Rounds) Open(tb testing.TB, db *pgxpool.Pool, stock *inventory.Stock, r *testenv.Redis, sku string, price int64, seed inventory.Seed) int64 {
	tb.Helper()
	round := OpenSaleWith(tb, db, stock, r, sku, price, seed)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.skus == nil {
		rs.skus = map[int64]string{}
	}
	rs.skus[round] = sku
	return round
}

// SKU is the SKU of a round Open opened ("" for another).
func (rs *Rounds) SKU(round int64) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.skus[round]
}

// All is every round Open opened, with its SKU (a copy).
func (rs *Rounds) All() map[int64]string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return maps.Clone(rs.skus)
}
