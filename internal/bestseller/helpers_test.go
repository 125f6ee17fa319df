package bestseller

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/testenv"
)

type fixture struct {
	s       *Service
	db      *testenv.Database
	r       *testenv.Redis
	catalog *inventory.Catalog
	user    string
	rounds  map[string]int64
}

// fixedNow is the clock of the tests: a Wednesday, 10:00 UTC, about a year
// ahead (so that Redis, on the real clock, expires none of the keys), in a
// week whose Monday is not the first of the month (so that the previous
// Sunday is in the same month).
var fixedNow = func() time.Time {
	t := time.Now().UTC().AddDate(1, 0, 0)
	t = time.Date(t.Year(), t.Month(), t.Day(), 10, 0, 0, 0, time.UTC)
	t = t.AddDate(0, 0, (int(time.Wednesday)-int(t.Weekday())+7)%7)
	for t.AddDate(0, 0, -2).Day() < 2 || t.AddDate(0, 0, -2).Month() != t.Month() {
		t = t.AddDate(0, 0, 7)
	}
	return t
}()

// day is midnight UTC of fixedNow's day plus days.
func day(days int) time.Time {
	return time.Date(fixedNow.Year(), fixedNow.Month(), fixedNow.Day()+days, 0, 0, 0, 0, time.UTC)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	c := cache.New(r.Client, cache.Options{Prefix: r.Prefix + "cache:", TTL: time.Minute}, reg)
	catalog := inventory.NewCatalog(db.Pool, r.Client, c, r.Prefix, log)
	s := New(r.Client, db.Pool, catalog, lock.New(r.Client, r.Prefix), r.Prefix, log, reg)
	s.now = func() time.Time { return fixedNow }
	f := &fixture{s: s, db: db, r: r, catalog: catalog, rounds: map[string]int64{}}
	f.user = uuid.NewString()
	f.exec(t, `INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, f.user, f.user+"@example.com")
	return f
}

func (f *fixture) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := f.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// product creates a catalog product named "Name of <sku>".
func (f *fixture) product(t testing.TB, sku string) {
	t.Helper()
	_, err := f.catalog.Create(context.Background(), sku, inventory.ProductInput{Name: "Name of " + sku, Category: "c", PriceCents: 100})
	if err != nil {
		t.Fatal(err)
	}
}

// round returns a sale round of sku in PostgreSQL (order items need one).
func (f *fixture) round(t testing.TB, sku string) int64 {
	t.Helper()
	if id, ok := f.rounds[sku]; ok {
		return id
	}
	var id int64
	err := f.db.Pool.QueryRow(context.Background(),
		`INSERT INTO sale_rounds (sku, quantity, per_user_limit, price_cents) VALUES ($1, 1000000000, 0, 100) RETURNING id`, sku).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	f.rounds[sku] = id
	return id
}

// persist writes an order as the order writer would and returns it as the
// after-commit hook would hand it over. Call round for its SKUs first when
// goroutines share the fixture.
func (f *fixture) persist(t testing.TB, at time.Time, lines ...Line) Order {
	t.Helper()
	o := Order{ID: uuid.NewString(), At: at, Lines: lines}
	ctx := context.Background()
	tx, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, user_id, total_cents, stream_id, created_at) VALUES ($1, $2, 0, '0-1', $3)`,
		o.ID, f.user, at); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if _, err := tx.Exec(ctx, `INSERT INTO order_items (order_id, sku, round_id, quantity, price_cents) VALUES ($1, $2, $3, $4, 100)`,
			o.ID, l.SKU, f.rounds[l.SKU], l.Units); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return o
}

// board reads a board raw: units by SKU.
func (f *fixture) board(t testing.TB, p Period) map[string]int64 {
	t.Helper()
	zs, err := f.r.Client.ZRangeWithScores(context.Background(), f.s.keys.board(p, fixedNow), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, z := range zs {
		out[z.Member.(string)] = int64(-z.Score)
	}
	return out
}

// truth is what PostgreSQL says the board of p should hold.
func (f *fixture) truth(t testing.TB, p Period) map[string]int64 {
	t.Helper()
	snap, err := f.s.readSnapshot(context.Background(), fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range Periods {
		if q == p {
			return snap.totals[i]
		}
	}
	return nil
}

func redisZ(member string, units int64) redis.Z {
	return redis.Z{Member: member, Score: float64(-units)}
}
