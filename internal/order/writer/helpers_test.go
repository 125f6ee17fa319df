package writer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

type fixture struct {
	*ordertesting.Env
	svc  *order.Service
	keys orderkey.Keys // the order package's key names, as the writer sees them
}

func newFixture(t testing.TB) *fixture { return newPartitionedFixture(t, keyspace.Partitions{}) }

// newPartitionedFixture is a fixture whose orders go to parts.
func newPartitionedFixture(t testing.TB, parts keyspace.Partitions) *fixture {
	t.Helper()
	e := ordertesting.NewEnv(t, parts)
	exists := func(context.Context, string) (bool, error) { return false, nil }
	svc := order.New(e.DB.Pool, e.R.Client, e.Stock, exists, e.R.Prefix, e.Log, prometheus.NewRegistry(), order.Options{})
	return &fixture{Env: e, svc: svc, keys: orderkey.New(e.R.Prefix, parts)}
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
	o.Partitions = f.Parts
	if o.Block == 0 {
		o.Block = 50 * time.Millisecond
	}
	db, rdb := f.Conns()
	return New(db, rdb, f.R.Prefix, f.Log, prometheus.NewRegistry(), o)
}

// newSale is a fixture with a round of units of "s" at 100 cents, and
// a buyer.
func newSale(t *testing.T, units int) (f *fixture, round int64, u string) {
	t.Helper()
	f = newFixture(t)
	return f, f.Sale(t, "s", units, 0, 100), f.User(t)
}

// start runs w in the background.
func start(w *Writer) *ordertesting.Running { return ordertesting.Start(w.Run) }

// drained waits until every entry of every partition is acknowledged.
func (f *fixture) drained(t *testing.T) {
	t.Helper()
	ordertesting.Drained(t, f.R.Client, f.Parts.Count(), f.keys.Stream)
}

// pendingCount is the entries delivered and not acknowledged, over every
// partition.
func (f *fixture) pendingCount(t *testing.T) int64 {
	t.Helper()
	return ordertesting.Pending(t, f.R.Client, f.Parts.Count(), f.keys.Stream, group)
}

// crashAfterCommit runs the writer name with o until a simulated crash
// right after its first COMMIT, and fails t unless Run returns that crash.
func (f *fixture) crashAfterCommit(t *testing.T, name string, o Options) {
	t.Helper()
	w := f.writer(name, o)
	w.faultAfterCommit = crashOnce()
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "simulated crash") {
		t.Fatalf("Run = %v, want the simulated crash", err)
	}
}

// crashBeforeCommit runs the writer name with o until a simulated crash
// before its first COMMIT; it returns the writer and what Run returned.
func (f *fixture) crashBeforeCommit(name string, o Options) (*Writer, error) {
	w := f.writer(name, o)
	w.faultBeforeCommit = crashOnce()
	return w, w.Run(context.Background())
}

// crashOnce returns a hook that fails the first call only.
var crashOnce = ordertesting.CrashOnce

// drain runs the writer name with o until every entry is acknowledged,
// then stops it.
func (f *fixture) drain(t *testing.T, name string, o Options) *Writer {
	t.Helper()
	w := f.writer(name, o)
	r := start(w)
	f.drained(t)
	r.Stop(t)
	return w
}

// placeN places n orders of qty units of sku for u.
func (f *fixture) placeN(t *testing.T, u, sku string, n, qty int) []order.Placed {
	t.Helper()
	placed := make([]order.Placed, n)
	for i := range placed {
		placed[i] = f.place(t, u, sku, qty)
	}
	return placed
}

// wantWritten fails t unless the orders table holds rows orders and round
// has sold units confirmed.
func (f *fixture) wantWritten(t *testing.T, round, rows, sold int64) {
	t.Helper()
	if r, s := f.OrderRows(t), f.Sold(t, round); r != rows || s != sold {
		t.Fatalf("rows %d sold %d, want %d and %d", r, s, rows, sold)
	}
}
