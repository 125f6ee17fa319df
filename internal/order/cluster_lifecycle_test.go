package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/testenv"
)

// lifeFixture is an order service on a private 3-master Redis Cluster
// with 12 grouped partitions (4 per master) and a PostgreSQL database of
// the test's own.
type lifeFixture struct {
	c      *testenv.RedisCluster
	rdb    redis.UniversalClient
	db     *testenv.Database
	parts  keyspace.Partitions
	stock  *inventory.Stock
	svc    *Service
	pay    *TestProvider
	rounds map[string]int64 // sku -> round
	quant  map[string]int64 // sku -> units the round opened with
}

func newLifeFixture(t *testing.T) *lifeFixture {
	t.Helper()
	c := testenv.StartCluster(t, 3)
	ctx := context.Background()
	rdb, err := database.OpenUniversal(ctx, c.URL, true, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	f := &lifeFixture{c: c, rdb: rdb, db: testenv.NewDatabase(t), parts: keyspace.NewPartitions(12, true),
		pay: NewTestProvider(), rounds: map[string]int64{}, quant: map[string]int64{}}
	f.stock = inventory.NewPartitionedStock(rdb, c.Prefix, f.parts)
	exists := func(context.Context, string) (bool, error) { return false, nil }
	f.svc = New(f.db.Pool, rdb, f.stock, exists, c.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), Options{PaymentTTL: time.Hour, Payments: f.pay})
	return f
}

func (f *lifeFixture) user(t *testing.T) string { return ordertesting.User(t, f.db.Pool) }

// skuIn returns a SKU of partition p, the first of "<name>-<p>-<i>".
func (f *lifeFixture) skuIn(name string, p int) string {
	for i := 0; ; i++ {
		if sku := fmt.Sprintf("%s-%d-%d", name, p, i); f.parts.Of(sku) == p {
			return sku
		}
	}
}

// sale creates the product and opens a round of units, price 100.
func (f *lifeFixture) sale(t *testing.T, sku string, units int) {
	t.Helper()
	ctx := context.Background()
	c := cache.New(f.rdb, cache.Options{Prefix: f.c.Prefix + "cache:", TTL: time.Minute}, prometheus.NewRegistry())
	catalog := inventory.NewCatalogOn(f.db.Pool, f.stock, c, slog.New(slog.DiscardHandler), inventory.CatalogOptions{})
	if _, err := catalog.Create(ctx, sku, inventory.ProductInput{Name: sku, Category: "c", PriceCents: 100}); err != nil {
		t.Fatalf("create %s: %v", sku, err)
	}
	rep, err := inventory.NewSales(f.db.Pool, f.stock).Open(ctx, sku, inventory.Seed{Quantity: units})
	if err != nil {
		t.Fatalf("open sale of %s: %v", sku, err)
	}
	f.rounds[sku], f.quant[sku] = *rep.RoundID, int64(units)
}

// place makes an order of lines for user as the reserve script does (the
// stock taken, the order event in the home stream, the pending status, its
// due entry and the buyer's pending index), each write in its own slot:
// the reserve script spans the buyer's slot and does not run on a cluster
// yet (placement there is built apart). Its id is stamped with its home,
// the first line's partition, as Place makes it.
func (f *lifeFixture) place(t *testing.T, user string, lines ...Line) string {
	t.Helper()
	ctx := context.Background()
	id, err := f.svc.newOrderID(user, lines)
	if err != nil {
		t.Fatal(err)
	}
	home := homeOfLines(f.svc.keys, lines)
	var items []ReservedItem
	var total int64
	for _, l := range lines {
		live, ok, err := f.stock.Live(ctx, l.SKU)
		if err != nil || !ok || live.Available < int64(l.Quantity) {
			t.Fatalf("place %v: live %+v %v %v", l, live, ok, err)
		}
		f.rdb.HIncrBy(ctx, f.stock.SaleKey(l.SKU), "available", -int64(l.Quantity))
		f.rdb.HIncrBy(ctx, f.stock.BuyersKey(l.SKU), user, int64(l.Quantity))
		items = append(items, ReservedItem{SKU: l.SKU, Quantity: l.Quantity, PriceCents: live.PriceCents,
			RoundID: live.Round, Released: live.Released})
		total += int64(l.Quantity) * live.PriceCents
	}
	js, _ := json.Marshal(items)
	now := time.Now()
	created, expires := strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(now.Add(f.svc.paymentTTL).UnixMilli(), 10)
	tot := strconv.FormatInt(total, 10)
	steps := []error{
		f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.svc.keys.Stream(home), Values: []string{"order_id", id, "user_id", user,
			"created_ms", created, "total_cents", tot, "items", string(js), "expires_ms", expires}}).Err(),
		f.rdb.HSet(ctx, f.svc.keys.Status(id), "user_id", user, "status", StatusPending, "items", string(js),
			"total_cents", tot, "created_ms", created, "expires_ms", expires, "partition", home).Err(),
		f.rdb.PExpire(ctx, f.svc.keys.Status(id), f.svc.statusTTL()).Err(),
		f.rdb.ZAdd(ctx, f.svc.keys.Due(home), redis.Z{Score: float64(now.Add(f.svc.paymentTTL).UnixMilli()), Member: id}).Err(),
		f.rdb.ZAdd(ctx, f.svc.keys.Pending(user), redis.Z{Score: float64(now.UnixMilli()), Member: id}).Err(),
	}
	if err := errors.Join(steps...); err != nil {
		t.Fatalf("place %v: %v", lines, err)
	}
	return id
}

func (f *lifeFixture) writer(name string, o WriterOptions) Writer {
	o.Consumer, o.Partitions, o.Block = name, f.parts, 50*time.Millisecond
	return NewWriter(f.db.Pool, f.rdb, f.c.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), o)
}

// drained waits until every entry of every partition is acknowledged.
func (f *lifeFixture) drained(t *testing.T) {
	t.Helper()
	ordertesting.Drained(t, f.rdb, f.parts.Count(), f.svc.keys.Stream)
}

func (f *lifeFixture) writeAll(t *testing.T) {
	t.Helper()
	w := start(f.writer("w", WriterOptions{}))
	f.drained(t)
	w.Stop(t)
}

func (f *lifeFixture) sweeper() Sweeper {
	return NewSweeper(f.rdb, f.stock, f.c.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), SweeperOptions{Batch: 3})
}

func (f *lifeFixture) status(t *testing.T, id string) string {
	t.Helper()
	return f.rdb.HGet(context.Background(), f.svc.keys.Status(id), "status").Val()
}

func (f *lifeFixture) available(t *testing.T, sku string) int64 {
	t.Helper()
	return ordertesting.Available(t, f.stock, sku)
}

func (f *lifeFixture) bought(t *testing.T, sku, user string) int64 {
	t.Helper()
	n, _ := f.rdb.HGet(context.Background(), f.stock.BuyersKey(sku), user).Int64()
	return n
}

func (f *lifeFixture) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	return ordertesting.Count(t, f.db.Pool, query, args...)
}

// masterOf is the address of the master holding partition p.
func (f *lifeFixture) masterOf(t *testing.T, p int) string {
	t.Helper()
	m, err := f.c.Client.MasterForKey(context.Background(), f.svc.keys.Stream(p))
	if err != nil {
		t.Fatal(err)
	}
	return m.Options().Addr
}

// homes is one SKU per partition, on sale with units each; it fails
// unless their partitions span every master.
func (f *lifeFixture) homes(t *testing.T, name string, units int) []string {
	t.Helper()
	skus := make([]string, f.parts.Count())
	masters := map[string]bool{}
	for p := range skus {
		skus[p] = f.skuIn(name, p)
		f.sale(t, skus[p], units)
		masters[f.masterOf(t, p)] = true
	}
	if len(masters) != len(f.c.Masters) {
		t.Fatalf("the partitions reach %d of %d masters", len(masters), len(f.c.Masters))
	}
	return skus
}

// transitions are the transition events of every partition's stream, by
// order id, with the partition each lies in.
func (f *lifeFixture) transitions(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for p := range f.parts.Count() {
		for _, m := range f.rdb.XRange(context.Background(), f.svc.keys.Stream(p), "-", "+").Val() {
			if k, _ := m.Values["kind"].(string); k == kindTransition {
				id, _ := m.Values["order_id"].(string)
				st, _ := m.Values["status"].(string)
				out[id] = append(out[id], fmt.Sprintf("%s@%d", st, p))
			}
		}
	}
	return out
}

// The writer confirms orders homed in every partition of a 3-master
// cluster, a crash between COMMIT and the acknowledgement included: each
// row once, each status confirmed, each buyer's pending index emptied, and
// a buyer's listing (the pending index, then PostgreSQL with the live
// statuses) shows every order before and after.
func TestWriterConfirmsOnEveryMasterOfACluster(t *testing.T) {
	t.Parallel()
	f := newLifeFixture(t)
	skus := f.homes(t, "wc", 10)
	users := []string{f.user(t), f.user(t), f.user(t)}
	var ids []string
	byUser := map[string]int{}
	for p, sku := range skus {
		u := users[p%3]
		ids = append(ids, f.place(t, u, Line{SKU: sku, Quantity: 2}))
		// A spread order homed here with a line on the next partition.
		ids = append(ids, f.place(t, u, Line{SKU: sku, Quantity: 1}, Line{SKU: skus[(p+5)%len(skus)], Quantity: 1}))
		byUser[u] += 2
	}
	ctx := context.Background()
	for _, u := range users {
		page, err := f.svc.List(ctx, u, 50, "")
		if err != nil || len(page.Items) != byUser[u] {
			t.Fatalf("pending listing of %s: %d orders (%v), want %d", u, len(page.Items), err, byUser[u])
		}
	}
	w := f.writer("w1", WriterOptions{Batch: 3})
	w.InjectFaults(nil, crashOnce())
	if err := w.Run(ctx); err == nil {
		t.Fatal("Run returned without the simulated crash")
	}
	// Restarted under its name, it finds its own entries first.
	r := start(f.writer("w1", WriterOptions{}))
	f.drained(t)
	r.Stop(t)
	if rows := f.count(t, `SELECT count(*) FROM orders`); rows != int64(len(ids)) {
		t.Fatalf("%d rows, want %d", rows, len(ids))
	}
	for _, id := range ids {
		if st := f.status(t, id); st != StatusConfirmed {
			t.Fatalf("order %s (home %d): %q, want confirmed", id, f.parts.Home(id), st)
		}
	}
	for _, u := range users {
		if n := f.rdb.ZCard(ctx, f.svc.keys.Pending(u)).Val(); n != 0 {
			t.Fatalf("%s's pending index holds %d orders after the writer", u, n)
		}
		page, err := f.svc.List(ctx, u, 50, "")
		if err != nil || len(page.Items) != byUser[u] {
			t.Fatalf("listing of %s: %d orders (%v), want %d", u, len(page.Items), err, byUser[u])
		}
		for _, o := range page.Items {
			if o.Status != StatusConfirmed {
				t.Fatalf("listed %s as %q", o.ID, o.Status)
			}
		}
	}
	for _, sku := range skus {
		rep, err := inventory.NewSales(f.db.Pool, f.stock).Report(ctx, sku)
		if err != nil || rep.Confirmed != 4 {
			t.Fatalf("%s: sold %+v (%v), want 4", sku, rep, err)
		}
	}
}

// A writer that stops between its two acknowledgement steps on a cluster
// (the pending indexes done, the ack and the statuses not) leaves nothing
// wrong: the orders are listed all the same (from PostgreSQL), and the
// restarted writer, redelivered the entries, acks and confirms them once.
func TestWriterStoppedBetweenItsAckStepsOnACluster(t *testing.T) {
	t.Parallel()
	f := newLifeFixture(t)
	skus := f.homes(t, "ws", 5)
	u := f.user(t)
	ctx := context.Background()
	var ids []string
	for _, sku := range skus {
		ids = append(ids, f.place(t, u, Line{SKU: sku, Quantity: 1}))
	}
	w := f.writer("w1", WriterOptions{})
	w.InjectAckFault(crashOnce())
	if err := w.Run(ctx); err == nil || !strings.Contains(err.Error(), "simulated crash") {
		t.Fatalf("Run = %v, want the simulated crash", err)
	}
	if page, err := f.svc.List(ctx, u, 50, ""); err != nil || len(page.Items) != len(ids) {
		t.Fatalf("listing after the stop: %d orders (%v), want %d", len(page.Items), err, len(ids))
	}
	r := start(f.writer("w1", WriterOptions{}))
	f.drained(t)
	r.Stop(t)
	for _, id := range ids {
		if st := f.status(t, id); st != StatusConfirmed {
			t.Fatalf("order %s: %q after the redelivery, want confirmed", id, st)
		}
	}
	if n := f.rdb.ZCard(ctx, f.svc.keys.Pending(u)).Val(); n != 0 {
		t.Fatalf("the pending index holds %d orders", n)
	}
	if rows := f.count(t, `SELECT count(*) FROM orders`); rows != int64(len(ids)) {
		t.Fatalf("%d rows, want %d", rows, len(ids))
	}
}

// An entry that can never be written, homed on each master, is
// dead-lettered on a cluster: its order becomes rejected and leaves its
// buyer's pending index; an order cancelled before its entry was
// dead-lettered keeps its final status.
func TestDeadLetterOnACluster(t *testing.T) {
	t.Parallel()
	f := newLifeFixture(t)
	skus := f.homes(t, "dl", 5)
	u := f.user(t)
	ctx := context.Background()
	var bad, cancelled []string
	for p, sku := range skus {
		id := f.place(t, u, Line{SKU: sku, Quantity: 1})
		if p%2 == 1 {
			if _, err := f.svc.Cancel(ctx, u, id); err != nil {
				t.Fatal(err)
			}
			cancelled = append(cancelled, id)
		} else {
			bad = append(bad, id)
		}
		// Spoil the order event: its total no longer sums its lines.
		m := f.rdb.XRange(ctx, f.svc.keys.Stream(p), "-", "+").Val()[0]
		vals := []string{}
		for k, v := range m.Values {
			if k == "total_cents" {
				v = "1"
			}
			vals = append(vals, k, v.(string))
		}
		f.rdb.XDel(ctx, f.svc.keys.Stream(p), m.ID)
		f.rdb.XAdd(ctx, &redis.XAddArgs{Stream: f.svc.keys.Stream(p), Values: vals})
	}
	w := start(f.writer("w", WriterOptions{MaxDeliveries: 1}))
	f.drained(t)
	w.Stop(t)
	var dead int64
	for p := range f.parts.Count() {
		dead += f.rdb.XLen(ctx, f.svc.keys.Dead(p)).Val()
	}
	if dead != int64(len(skus)) {
		t.Fatalf("%d dead letters, want %d", dead, len(skus))
	}
	for _, id := range bad {
		if st := f.status(t, id); st != StatusRejected {
			t.Fatalf("order %s: %q, want rejected", id, st)
		}
	}
	for _, id := range cancelled {
		if st := f.status(t, id); st != StatusCancelled {
			t.Fatalf("cancelled order %s: %q after its dead letter, want cancelled", id, st)
		}
	}
	if n := f.rdb.ZCard(ctx, f.svc.keys.Pending(u)).Val(); n != 0 {
		t.Fatalf("the pending index holds %d orders", n)
	}
}

// Pay, cancel and expiry of orders in one partition run on every master of
// a cluster (each step one script in the home's slot): the paid order keeps
// its units and is charged once, the others give theirs back once, each
// transition event lands in the home stream and is recorded once.
func TestPayCancelExpireOnEveryMasterOfACluster(t *testing.T) {
	t.Parallel()
	f := newLifeFixture(t)
	skus := f.homes(t, "lc", 3)
	u := f.user(t)
	ctx := context.Background()
	type trio struct{ paid, cancelled, expired string }
	orders := make([]trio, len(skus))
	for p, sku := range skus {
		orders[p] = trio{f.place(t, u, Line{SKU: sku, Quantity: 1}), f.place(t, u, Line{SKU: sku, Quantity: 1}),
			f.place(t, u, Line{SKU: sku, Quantity: 1})}
	}
	f.writeAll(t)
	for p, o := range orders {
		if got, err := f.svc.Pay(ctx, u, o.paid, "tok_ok"); err != nil || got.Status != StatusPaid {
			t.Fatalf("partition %d: pay = %+v %v", p, got, err)
		}
		if got, err := f.svc.Cancel(ctx, u, o.cancelled); err != nil || got.Status != StatusCancelled {
			t.Fatalf("partition %d: cancel = %+v %v", p, got, err)
		}
		// Its payment window closes now.
		f.rdb.ZAdd(ctx, f.svc.keys.Due(p), redis.Z{Score: 1, Member: o.expired})
	}
	if n, err := f.sweeper().Sweep(ctx); err != nil || n != len(skus) {
		t.Fatalf("swept %d (%v), want %d", n, err, len(skus))
	}
	events := f.transitions(t)
	for p, o := range orders {
		for id, want := range map[string]string{o.paid: StatusPaid, o.cancelled: StatusCancelled, o.expired: StatusExpired} {
			if st := f.status(t, id); st != want {
				t.Fatalf("order %s: %q, want %q", id, st, want)
			}
			if ev := events[id]; len(ev) != 1 || ev[0] != fmt.Sprintf("%s@%d", want, p) {
				t.Fatalf("order %s: transition events %v, want one %s in partition %d", id, ev, want, p)
			}
		}
		if a, b := f.available(t, skus[p]), f.bought(t, skus[p], u); a != 2 || b != 1 {
			t.Fatalf("%s: available %d, bought %d, want 2 and 1", skus[p], a, b)
		}
		if cents, n := f.pay.Charged(o.paid); cents != 100 || n != 1 {
			t.Fatalf("order %s charged %d in %d", o.paid, cents, n)
		}
		if n := f.rdb.ZCard(ctx, f.svc.keys.Due(p)).Val(); n != 0 {
			t.Fatalf("partition %d: %d orders still due", p, n)
		}
	}
	f.writeAll(t)
	if n := f.count(t, `SELECT count(*) FROM order_transitions`); n != int64(3*len(skus)) {
		t.Fatalf("%d transitions recorded, want %d", n, 3*len(skus))
	}
}

// spreadLines is an order of one unit of skus[p], skus[p+4] and skus[p+8]:
// three partitions, one per master.
func spreadLines(skus []string, p int) []Line {
	n := len(skus)
	return []Line{{SKU: skus[p], Quantity: 1}, {SKU: skus[(p+4)%n], Quantity: 2}, {SKU: skus[(p+8)%n], Quantity: 3}}
}

// An order whose lines lie in three partitions, one per master, is
// cancelled: every unit of every line goes back exactly once (a second
// cancel gives nothing), one transition event lands in the home stream, and
// nothing is left owed. Its expiry does the same, and a paid one gives
// nothing back.
func TestSpreadOrderGivesEveryUnitBackOnce(t *testing.T) {
	t.Parallel()
	f := newLifeFixture(t)
	skus, u, ids := f.spreadOrders(t, "sp", 20, 0, 1, 2)
	cancelled, expired, paid := ids[0], ids[1], ids[2]
	ctx := context.Background()
	f.writeAll(t)
	for range 2 {
		if o, err := f.svc.Cancel(ctx, u, cancelled); err != nil || o.Status != StatusCancelled {
			t.Fatalf("cancel = %+v %v", o, err)
		}
	}
	if _, err := f.svc.Pay(ctx, u, paid, "tok_ok"); err != nil {
		t.Fatal(err)
	}
	f.rdb.ZAdd(ctx, f.svc.keys.Due(1), redis.Z{Score: 1, Member: expired})
	f.rdb.ZAdd(ctx, f.svc.keys.Due(2), redis.Z{Score: 1, Member: paid})
	if n, err := f.sweeper().Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("swept %d (%v), want 1", n, err)
	}
	if _, err := f.svc.Cancel(ctx, u, paid); !errors.Is(err, ErrNotCancellable) {
		t.Fatalf("cancel of a paid order: %v", err)
	}
	// Of each SKU only the paid order's units are out.
	out := map[string]int64{}
	for _, l := range spreadLines(skus, 2) {
		out[l.SKU] = int64(l.Quantity)
	}
	for _, sku := range skus {
		if a, b := f.available(t, sku), f.bought(t, sku, u); a != 20-out[sku] || b != out[sku] {
			t.Fatalf("%s: available %d, bought %d, want %d and %d", sku, a, b, 20-out[sku], out[sku])
		}
	}
	events := f.transitions(t)
	for id, want := range map[string]string{cancelled: "cancelled@0", expired: "expired@1", paid: "paid@2"} {
		if ev := events[id]; len(ev) != 1 || ev[0] != want {
			t.Fatalf("order %s: transition events %v, want %s", id, ev, want)
		}
	}
	for p := range f.parts.Count() {
		if n := f.rdb.ZCard(ctx, f.svc.keys.Owed(p)).Val(); n != 0 {
			t.Fatalf("partition %d still owes %d orders", p, n)
		}
	}
	f.writeAll(t)
	if n := f.count(t, `SELECT count(*) FROM order_transitions`); n != 3 {
		t.Fatalf("%d transitions recorded, want 3", n)
	}
}

// spreadOrders opens sales of units for SKUs homed in every partition
// (homes) and places for one buyer the spread order spreadLines(skus, p)
// of each p of ps; ids are in ps's order.
func (f *lifeFixture) spreadOrders(t *testing.T, name string, units int, ps ...int) (skus []string, user string, ids []string) {
	t.Helper()
	skus, user = f.homes(t, name, units), f.user(t)
	for _, p := range ps {
		ids = append(ids, f.place(t, user, spreadLines(skus, p)...))
	}
	return skus, user, ids
}

// cancelStoppedAfterDecision cancels user's order id, stopping right after
// its decision as a crash would: the other partitions' units stay owed.
func (f *lifeFixture) cancelStoppedAfterDecision(t *testing.T, user, id string) {
	t.Helper()
	f.svc.life.faultAfterDecision = crashOnce()
	if _, err := f.svc.Cancel(context.Background(), user, id); err == nil {
		t.Fatal("the cancel did not stop")
	}
}

// owedNow makes every owed entry due, as if owedGrace had passed.
func (f *lifeFixture) owedNow(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for p := range f.parts.Count() {
		for _, id := range f.rdb.ZRange(ctx, f.svc.keys.Owed(p), 0, -1).Val() {
			f.rdb.ZAdd(ctx, f.svc.keys.Owed(p), redis.Z{Score: 1, Member: id})
		}
	}
}

func (f *lifeFixture) owedCount(t *testing.T) int64 {
	t.Helper()
	var n int64
	for p := range f.parts.Count() {
		n += f.rdb.ZCard(context.Background(), f.svc.keys.Owed(p)).Val()
	}
	return n
}

// A cancel that stops right after its decision (the home's units back,
// the status cancelled) leaves the other partitions' units owed; the
// sweeper's owed step gives them back exactly once, and a cancel or an
// expiry after it gives nothing more. An order whose cancel stopped before
// its decision is left in the owed set until it is decided, then settled.
func TestSpreadCancelStoppedAfterItsDecisionIsFinishedBySweeper(t *testing.T) {
	t.Parallel()
	f := newLifeFixture(t)
	skus, u, ids := f.spreadOrders(t, "cr", 10, 3, 5)
	crashed, undecided := ids[0], ids[1]
	ctx := context.Background()
	f.writeAll(t)
	f.cancelStoppedAfterDecision(t, u, crashed)
	if st := f.status(t, crashed); st != StatusCancelled {
		t.Fatalf("status %q after the decision, want cancelled", st)
	}
	home, foreign := skus[3], []string{skus[7], skus[11]}
	if a := f.available(t, home); a != 10 {
		t.Fatalf("home line: available %d after the decision, want 10", a)
	}
	for _, sku := range foreign {
		if a := f.available(t, sku); a == 10 {
			t.Fatalf("%s: its units went back before the crash was repaired", sku)
		}
	}
	// A stop before the decision: only the owed entry.
	f.rdb.ZAdd(ctx, f.svc.keys.Owed(5), redis.Z{Score: 1, Member: undecided})
	f.owedNow(t)
	sw := f.sweeper()
	if n, err := sw.SettleOwed(ctx); err != nil || n != 1 {
		t.Fatalf("settled %d (%v), want the crashed cancel only", n, err)
	}
	for _, sku := range append(foreign, home) {
		if a, b := f.available(t, sku), f.bought(t, sku, u); a != 10 || b != 0 {
			t.Fatalf("%s: available %d, bought %d after the repair, want 10 and 0", sku, a, b)
		}
	}
	// Again, and by every other way in: nothing more comes back.
	f.owedNow(t)
	if _, err := sw.SettleOwed(ctx); err != nil {
		t.Fatal(err)
	}
	if o, err := f.svc.Cancel(ctx, u, crashed); err != nil || o.Status != StatusCancelled {
		t.Fatalf("cancel again = %+v %v", o, err)
	}
	o, _, _ := f.svc.life.read(ctx, crashed)
	if r, err := f.svc.life.giveBack(ctx, o, StatusExpired); err != nil || !r.Refused || r.State != StatusCancelled {
		t.Fatalf("expiry after the cancel = %+v %v", r, err)
	}
	for _, sku := range append(foreign, home) {
		if a := f.available(t, sku); a != 10 {
			t.Fatalf("%s: available %d, want 10", sku, a)
		}
	}
	if f.owedCount(t) != 1 {
		t.Fatalf("owed entries %d, want the undecided order's", f.owedCount(t))
	}
	// The undecided order expires; the entry it left is settled.
	f.rdb.ZAdd(ctx, f.svc.keys.Due(5), redis.Z{Score: 1, Member: undecided})
	if n, err := sw.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("swept %d (%v)", n, err)
	}
	f.owedNow(t)
	if _, err := sw.SettleOwed(ctx); err != nil || f.owedCount(t) != 0 {
		t.Fatalf("owed entries %d (%v), want none", f.owedCount(t), err)
	}
	for _, sku := range skus {
		if a := f.available(t, sku); a != 10 {
			t.Fatalf("%s: available %d, want 10", sku, a)
		}
	}
}

// The running sweeper (its loop, under its lock) finishes owed releases.
func TestSweeperLoopFinishesOwedReleases(t *testing.T) {
	t.Parallel()
	f := newLifeFixture(t)
	skus, u, ids := f.spreadOrders(t, "lo", 10, 6)
	ctx := context.Background()
	f.cancelStoppedAfterDecision(t, u, ids[0])
	f.owedNow(t)
	sw := NewSweeper(f.rdb, f.stock, f.c.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(),
		SweeperOptions{Interval: 20 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sw.Run(rctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for f.owedCount(t) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	for _, sku := range skus {
		if a := f.available(t, sku); a != 10 {
			t.Fatalf("%s: available %d, want 10 (owed entries left: %d)", sku, a, f.owedCount(t))
		}
	}
}

// A cancel, a payment and an expiry race for each of many confirmed
// orders, in one partition or spread over three masters, released
// together: each order ends in exactly one final state, recorded by one
// transition event in its home stream; only the paid ones keep a charge
// and their units, every other unit is back exactly once, nothing is left
// owed, and the writer records one transition per order.
func TestCancelPayExpiryRaceOnACluster(t *testing.T) {
	t.Parallel()
	f := newLifeFixture(t)
	const units = 50
	skus := f.homes(t, "ra", units)
	u := f.user(t)
	ctx := context.Background()
	lines := map[string][]Line{}
	for p := range skus {
		one := []Line{{SKU: skus[p], Quantity: 1}}
		lines[f.place(t, u, one...)] = one
		spread := spreadLines(skus, p)
		lines[f.place(t, u, spread...)] = spread
	}
	f.writeAll(t)
	for id := range lines {
		f.rdb.ZAdd(ctx, f.svc.keys.Due(f.parts.Home(id)), redis.Z{Score: 1, Member: id})
	}
	x := NewExpiry(f.rdb, f.stock, f.c.Prefix, slog.New(slog.DiscardHandler))
	var ops []func()
	for id := range lines {
		ops = append(ops, func() {
			if _, err := f.svc.Cancel(ctx, u, id); err != nil && !errors.Is(err, ErrNotCancellable) {
				t.Errorf("cancel %s: %v", id, err)
			}
		}, func() {
			if _, err := f.svc.Pay(ctx, u, id, "tok_ok"); err != nil && !errors.Is(err, ErrNotPayable) {
				t.Errorf("pay %s: %v", id, err)
			}
		}, func() {
			// The sweeper's work on an order it claimed.
			if _, _, err := x.Expire(ctx, f.parts.Home(id), id); err != nil {
				t.Errorf("expire %s: %v", id, err)
			}
		})
	}
	ordertesting.Together(ops...)
	if _, err := f.sweeper().Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	events := f.transitions(t)
	won := map[string]int{}
	for id, ls := range lines {
		st := f.status(t, id)
		won[st]++
		if ev := events[id]; len(ev) != 1 || ev[0] != fmt.Sprintf("%s@%d", st, f.parts.Home(id)) {
			t.Fatalf("order %s ended %q with transition events %v", id, st, ev)
		}
		cents, _ := f.pay.Charged(id)
		switch st {
		case StatusPaid:
			var want int64
			for _, l := range ls {
				out[l.SKU] += int64(l.Quantity)
				want += 100 * int64(l.Quantity)
			}
			if cents != want {
				t.Fatalf("paid order %s charged %d, want %d", id, cents, want)
			}
		case StatusCancelled, StatusExpired:
			if cents != 0 {
				t.Fatalf("%s order %s kept a charge of %d", st, id, cents)
			}
		default:
			t.Fatalf("order %s ended %q", id, st)
		}
	}
	t.Logf("outcomes: %v", won)
	for _, sku := range skus {
		if a, b := f.available(t, sku), f.bought(t, sku, u); a != units-out[sku] || b != out[sku] {
			t.Fatalf("%s: available %d, bought %d, want %d and %d", sku, a, b, units-out[sku], out[sku])
		}
	}
	if n := f.owedCount(t); n != 0 {
		t.Fatalf("%d orders still owed", n)
	}
	f.writeAll(t)
	if n := f.count(t, `SELECT count(*) FROM order_transitions`); n != int64(len(lines)) {
		t.Fatalf("%d transitions recorded, want %d", n, len(lines))
	}
}
