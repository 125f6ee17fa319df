package draw

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/testenv"
)

// fixture is the draws on a test's own PostgreSQL and Redis, with the
// test provider.
type fixture struct {
	svc   *Service
	pay   *order.TestProvider
	db    *testenv.Database
	r     *testenv.Redis
	stock *inventory.Stock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{db: testenv.NewDatabase(t), r: testenv.NewRedis(t), pay: order.NewTestProvider()}
	f.stock = inventory.NewStock(f.r.Client, f.r.Prefix)
	f.svc = New(f.db.Pool, f.pay, slog.New(slog.DiscardHandler), Options{})
	return f
}

// withOrders makes the fixture's won entries paid orders.
func (f *fixture) withOrders() *order.Service {
	exists := func(context.Context, string) (bool, error) { return true, nil }
	o := order.New(f.db.Pool, f.r.Client, f.stock, exists, f.r.Prefix, slog.New(slog.DiscardHandler),
		prometheus.NewRegistry(), order.Options{Payments: f.pay})
	f.svc.orders = o
	return o
}

// draw opens a draw of units for sku at price 100, closing in an hour.
func (f *fixture) draw(t *testing.T, sku string, units, limit int) int64 {
	t.Helper()
	return ordertesting.OpenSaleWith(t, f.db.Pool, f.stock, f.r, sku, 100, inventory.Seed{Quantity: units,
		PerUserLimit: limit, Draw: &inventory.DrawSettings{ClosesAt: time.Now().Add(time.Hour)}})
}

func (f *fixture) user(t *testing.T) string { return ordertesting.User(t, f.db.Pool) }

func (f *fixture) enter(t *testing.T, user, sku string, qty int) Entered {
	t.Helper()
	e, err := f.svc.Enter(context.Background(), user, sku, Enter{Quantity: qty, Token: "tok_visa"})
	if err != nil {
		t.Fatalf("enter %s x%d: %v", sku, qty, err)
	}
	return e
}

func (f *fixture) count(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	return ordertesting.Count(t, f.db.Pool, q, args...)
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("%s: error %v, want %s", what, err, code)
	}
}

// expected is the outcome the contract gives a draw: the entered entries
// ranked by the hex SHA-256 of seed:id, units down the ranks (capture
// failures passing theirs on), and the winners' digest.
type expected struct {
	order   []string       // entry ids by rank
	won     map[string]int // entry id -> units
	winners string         // winners_sha256
}

func expect(seed string, entries map[string]int, units int, fails map[string]bool) expected {
	ex := expected{won: map[string]int{}}
	for id := range entries {
		ex.order = append(ex.order, id)
	}
	key := func(id string) string { s := sha256.Sum256([]byte(seed + ":" + id)); return hex.EncodeToString(s[:]) }
	sort.Slice(ex.order, func(i, j int) bool { return key(ex.order[i]) < key(ex.order[j]) })
	h := sha256.New()
	for _, id := range ex.order {
		if units == 0 {
			break
		}
		if fails[id] {
			continue
		}
		n := min(entries[id], units)
		units -= n
		ex.won[id] = n
		h.Write([]byte(id + "\n"))
	}
	ex.winners = hex.EncodeToString(h.Sum(nil))
	return ex
}

// outcome reads the draw's rows: entry id -> (state, rank, won units).
type row struct {
	state string
	rank  int
	won   int
}

func (f *fixture) outcome(t *testing.T, round int64) map[string]row {
	t.Helper()
	rows, err := f.db.Pool.Query(context.Background(),
		`SELECT id::text, state, coalesce(rank, 0), CASE WHEN state = 'won' THEN won_units ELSE 0 END
		 FROM draw_entries WHERE round_id = $1`, round)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.state, &r.rank, &r.won); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	return out
}

func (f *fixture) seed(t *testing.T, round int64) string {
	t.Helper()
	var s string
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT draw_seed FROM sale_rounds WHERE id = $1`, round).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
