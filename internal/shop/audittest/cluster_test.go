package audittest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/saga"
	"github.com/shop-oss/shop/internal/order/sweeper"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/recovery"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// clusterSale is shoptest's cluster sale (a private 3-master Redis
// Cluster with 6 order partitions grouped as serve groups them: SKUs[p]
// are partition p's), and orders are placed, cancelled and expired by the
// order package itself (the saga for an order spanning partitions).
type clusterSale struct {
	*shoptest.ClusterSale
	orders *order.Service
}

const clusterUnits = 400

func newClusterSale(t *testing.T, paymentTTL time.Duration) *clusterSale {
	t.Helper()
	s := &clusterSale{ClusterSale: shoptest.NewClusterSale(t, "x", clusterUnits)}
	s.orders = s.Orders(order.Options{PaymentTTL: paymentTTL})
	return s
}

func (s *clusterSale) auditor() *audit.Auditor {
	a := audit.New(s.DB.Pool, s.RDB, s.Stock, s.Prefix, s.Log)
	a.LagBound = 0
	return a
}

// crossShard places, for user, an order homed in partition p: a unit of
// SKUs[p][0], and 2 units of SKUs[p+1][1] held outside its home.
func (s *clusterSale) crossShard(t *testing.T, user string, p int) string {
	t.Helper()
	o, err := s.orders.Place(context.Background(), user, []order.Line{{SKU: s.SKUs[p][0], Quantity: 1},
		{SKU: s.SKUs[(p+1)%6][1], Quantity: 2}}, order.PlaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return o.OrderID
}

// crossShardsWritten places a crossShard order homed in every partition,
// for one new buyer, and writes them all: the buyer, and the order ids by
// home partition.
func (s *clusterSale) crossShardsWritten(t *testing.T) (user string, ids []string) {
	t.Helper()
	user = s.User(t)
	for p := range s.SKUs {
		ids = append(ids, s.crossShard(t, user, p))
	}
	s.writeAll(t)
	return user, ids
}

// startWriter runs the order writer on every partition until stopped.
func (s *clusterSale) startWriter(t *testing.T) (stop func()) {
	return run(t, writer.New(s.DB.Pool, s.RDB, s.Prefix, s.Log, prometheus.NewRegistry(),
		writer.Options{Consumer: "w", Partitions: s.Parts, Block: 20 * time.Millisecond}).Run)
}

// writeAll has the writer write everything placed so far.
func (s *clusterSale) writeAll(t *testing.T) {
	t.Helper()
	stop := s.startWriter(t)
	s.Drained(t)
	stop()
}

// run starts f in the background; stop cancels it and waits.
func run(t *testing.T, f func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("background: %v", err)
		}
	}
}

// On a 3-master cluster, buyers released together place cross-shard
// checkouts (every order's lines in two or three partitions, so most lines
// are held in a partition other than the order's home) and buy-nows,
// cancel some, leave others to expire, while a writer writes, a sweeper
// expires and two audits run back to back: every audit is clean, at every
// instant. A foreign line is accounted only from its own partition's
// snapshot (its hold, the settled log, the SKU's released set), never
// from the home's stream as well. Afterwards the rounds add up exactly
// against PostgreSQL.
func TestExactAuditWhileCrossShardCheckoutsRun(t *testing.T) {
	t.Parallel()
	s := newClusterSale(t, 400*time.Millisecond)
	all := slices.Concat(s.SKUs...)
	users := make([]string, 8)
	for i := range users {
		users[i] = s.User(t)
	}
	stopWriter := s.startWriter(t)
	stopSweeper := run(t, sweeper.New(s.RDB, s.Stock, s.Prefix, s.Log, prometheus.NewRegistry(),
		sweeper.Options{Interval: 20 * time.Millisecond, Sagas: saga.NewRepair(s.RDB, s.Stock, s.Prefix, s.Log, saga.RepairOptions{})}).Run)

	start := make(chan struct{})
	var buyers sync.WaitGroup
	var placed, spread, cancelled atomic.Int64
	for g, u := range users {
		buyers.Add(1)
		go func() {
			defer buyers.Done()
			<-start
			ctx := context.Background()
			for i := range 100 {
				// Lines in partitions g+i, g+i+1 (and g+i+3): a checkout
				// whose other lines are held outside its home.
				p := g + i
				lines := []order.Line{{SKU: s.SKUs[p%6][i%2], Quantity: 1}}
				if i%4 != 3 {
					lines = append(lines, order.Line{SKU: s.SKUs[(p+1)%6][(i+1)%2], Quantity: 2})
				}
				if i%2 == 0 {
					lines = append(lines, order.Line{SKU: s.SKUs[(p+3)%6][i%2], Quantity: 1})
				}
				o, err := s.orders.Place(ctx, u, lines, order.PlaceOptions{})
				if err != nil {
					t.Errorf("place %v: %v", lines, err)
					return
				}
				placed.Add(1)
				if len(lines) > 1 {
					spread.Add(1)
				}
				if i%3 == 0 {
					if _, err := s.orders.Cancel(ctx, u, o.OrderID); err == nil {
						cancelled.Add(1)
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	var mu sync.Mutex
	var ran, flagged int
	kinds := map[string]int{}
	// The lag bound as shipped: orders in flight are not yet due in
	// PostgreSQL.
	waitAudits := shoptest.Audits(2, start, stop, func() *audit.Auditor {
		return audit.New(s.DB.Pool, s.RDB, s.Stock, s.Prefix, s.Log)
	}, func(rep audit.Report, err error) bool {
		if err != nil {
			t.Errorf("audit: %v", err)
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		ran++
		if !rep.OK {
			flagged++
			for _, p := range rep.Problems {
				kinds[p.Kind]++
			}
			if flagged <= 3 {
				t.Logf("audit %d during the sale: %+v", ran, rep.Problems)
			}
		}
		return true
	})
	close(start)
	buyers.Wait()
	close(stop)
	waitAudits()
	t.Logf("%d orders placed (%d spread over partitions, %d cancelled); %d audits during the sale, %d flagged: %v",
		placed.Load(), spread.Load(), cancelled.Load(), ran, flagged, kinds)
	if flagged > 0 {
		t.Errorf("%d of %d audits during the sale reported problems %v", flagged, ran, kinds)
	}
	if ran < 2 || spread.Load() == 0 {
		t.Fatal("too few audits or no spread order: the race tested nothing")
	}

	// Every unpaid order expires; then the rounds add up exactly.
	waitNoDue(t, s)
	s.Drained(t)
	stopSweeper()
	stopWriter()
	rep, err := s.auditor().Run(context.Background())
	if err != nil || !rep.OK || len(rep.Rounds) != len(all) {
		t.Fatalf("audit after the sale: %v, %d rounds, %+v", err, len(rep.Rounds), rep.Problems)
	}
	var held int64
	for _, r := range rep.Rounds {
		if r.Quantity != r.Available+r.HeldRedis || r.HeldRedis != r.HeldPostgres {
			t.Fatalf("round %+v does not add up", r)
		}
		held += r.HeldRedis
	}
	var kept int64
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(i.quantity), 0)
		FROM order_items i LEFT JOIN order_transitions t ON t.order_id = i.order_id
		WHERE t.status IS NULL OR t.status NOT IN ('cancelled', 'expired')`).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if held != kept || held != 0 {
		t.Fatalf("the rounds hold %d units, PostgreSQL's live orders %d; every order was cancelled or expired", held, kept)
	}
}

// waitNoDue waits until no order is due for expiry nor owed a release.
func waitNoDue(t *testing.T, s *clusterSale) {
	t.Helper()
	ctx := context.Background()
	keys := ledger.New(s.RDB, s.Prefix, s.Parts).Partitions()
	deadline := time.Now().Add(60 * time.Second)
	for _, k := range keys {
		owed := strings.TrimSuffix(k.Due, ":due") + ":owed"
		for s.RDB.ZCard(ctx, k.Due).Val()+s.RDB.ZCard(ctx, owed).Val() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("partition %d: orders still due or owed after 60s", k.Partition)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A real difference on a foreign line is still reported, in its SKU's
// partition: after cross-shard checkouts are written and the audit is
// clean, the units of one order's foreign line are given back behind the
// shop's back (available up, the buyer's count down, no release), and a
// unit is taken from another foreign SKU's available. Both are found while
// the settled log names the orders, and again once the log is gone (as
// trimmed when its retention passed: the orders are then older than the
// audit's fence and counted from PostgreSQL), where the audit without the
// corruption is clean too.
func TestClusterAuditReportsAForeignLineDifference(t *testing.T) {
	t.Parallel()
	s := newClusterSale(t, 0)
	ctx := context.Background()
	u, ids := s.crossShardsWritten(t)
	a := s.auditor()
	if rep, err := a.Run(ctx); err != nil || !rep.OK {
		t.Fatalf("audit before: %v %+v", err, rep.Problems)
	}

	// The foreign line of the order placed in partition 1: 2 units of
	// skus[2][1], held in partition 2; and a unit of skus[4][1].
	foreign, gone := s.SKUs[2][1], s.SKUs[4][1]
	corrupt := func(sign int64) {
		s.RDB.HIncrBy(ctx, s.Stock.SaleKey(foreign), "available", 2*sign)
		s.RDB.HIncrBy(ctx, s.Stock.BuyersKey(foreign), u, -2*sign)
		s.RDB.HIncrBy(ctx, s.Stock.SaleKey(gone), "available", -sign)
	}
	reported := func(how string) {
		t.Helper()
		rep, err := a.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, p := range rep.Problems {
			if p.SKU == "" || p.Partition == nil || *p.Partition != s.Parts.Of(p.SKU) {
				t.Errorf("%s: problem %+v: want it named with its SKU's partition", how, p)
			}
			got[p.SKU] = append(got[p.SKU], p.Kind)
			if p.Kind == "buyer" && !slices.Contains(p.OrderIDs, ids[1]) {
				t.Errorf("%s: problem %+v: want it to name order %s", how, p, ids[1])
			}
		}
		for _, k := range got {
			sort.Strings(k)
		}
		want := map[string][]string{foreign: {"buyer", "stock_postgres"}, gone: {"stock_postgres", "stock_redis"}}
		if rep.OK || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: problems %+v: got %v, want %v", how, rep.Problems, got, want)
		}
	}
	corrupt(1)
	reported("settled log")
	corrupt(-1)

	keys := ledger.New(s.RDB, s.Prefix, s.Parts).Partitions()
	for _, k := range keys {
		s.RDB.Del(ctx, k.Settled)
	}
	// The orders are older than the fence: their rows say they were
	// accepted an hour ago, so no clock need pass.
	s.Exec(t, `UPDATE orders SET created_at = created_at - interval '1 hour'`)
	if rep, err := a.Run(ctx); err != nil || !rep.OK {
		t.Fatalf("audit with the settled log trimmed: %v %+v", err, rep.Problems)
	}
	corrupt(1)
	reported("settled log trimmed")
}

// A failover on a cluster loses what partition 2's settled log said (the
// drops of its foreign lines' holds) and an accepted order homed in
// partition 3 (its event and status) whose line in partition 4 had been
// taken and settled: the audit finds both; recover rebuilds the stock and
// brings the settled logs in step (an entry for each order it counts as
// holding units outside its home, none for the lost order), after which
// the audit is clean at once, and a second recover changes nothing.
func TestRecoverRestoresTheSettledLog(t *testing.T) {
	t.Parallel()
	s := newClusterSale(t, 0)
	ctx := context.Background()
	u := s.User(t)
	place := func(p int) string { return s.crossShard(t, u, p) }
	var accepted []string
	for p := range s.SKUs {
		accepted = append(accepted, place(p))
	}
	s.writeAll(t)
	lost := place(3) // never written
	accepted = append(accepted, lost)
	a := audit.New(s.DB.Pool, s.RDB, s.Stock, s.Prefix, s.Log) // the lag bound as shipped: lost is recent
	if rep, err := a.Run(ctx); err != nil || !rep.OK {
		t.Fatalf("audit before: %v %+v", err, rep.Problems)
	}

	keys := ledger.New(s.RDB, s.Prefix, s.Parts).Partitions()
	s.RDB.Del(ctx, keys[2].Settled)
	last := s.RDB.XRevRangeN(ctx, keys[3].Stream, "+", "-", 1).Val()
	if len(last) != 1 || last[0].Values["order_id"] != lost {
		t.Fatalf("partition 3's last entry %v, want order %s's", last, lost)
	}
	s.RDB.XDel(ctx, keys[3].Stream, last[0].ID)
	s.RDB.Del(ctx, keys[3].StatusKey(lost))
	if rep, err := a.Run(ctx); err != nil || rep.OK {
		t.Fatalf("audit after the failover: %v, want problems, got none", err)
	}

	rec := recovery.New(s.DB.Pool, s.RDB, s.Stock, s.Prefix, s.Log)
	rep, err := rec.Run(ctx, accepted)
	if err != nil {
		t.Fatal(err)
	}
	// Partition 2 holds the foreign line of the order homed in 1; the lost
	// order's entry in partition 4 goes.
	if rep.SettledRestored != 2 || len(rep.Lost) != 1 || rep.Lost[0].OrderID != lost {
		t.Fatalf("recover: %d settled entries restored, lost %+v; want 2 and %s", rep.SettledRestored, rep.Lost, lost)
	}
	if rep, err := a.Run(ctx); err != nil || !rep.OK {
		t.Fatalf("audit after recover: %v %+v", err, rep.Problems)
	}
	if rep, err := rec.Run(ctx, accepted); err != nil || rep.SettledRestored != 0 {
		t.Fatalf("second recover: %v, %d settled entries changed, want none", err, rep.SettledRestored)
	}
}

// The settled log is read after the snapshot, in pages by score: with
// thousands of older entries in every partition's log (more than a page
// in one ms, and more than a page over many ms) ahead of the entries of
// the orders placed here, the audit still finds those and is clean, and
// still names a foreign line's difference.
func TestClusterAuditPagesTheSettledLog(t *testing.T) {
	t.Parallel()
	s := newClusterSale(t, 0)
	ctx := context.Background()
	u, ids := s.crossShardsWritten(t)

	now, err := s.RDB.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	old := now.UnixMilli() - 60000 // before every drop of this test's orders
	for p, k := range ledger.New(s.RDB, s.Prefix, s.Parts).Partitions() {
		var zs []redis.Z
		filler := func(i int, score int64) {
			zs = append(zs, redis.Z{Score: float64(score), Member: fmt.Sprintf(
				`{"order_id":"filler-%d-%d","user":"u","items":[{"sku":"elsewhere","quantity":1,"round_id":1}]}`, p, i)})
		}
		for i := range 1500 { // one ms: more than a page
			filler(i, old)
		}
		for i := 1500; i < 3700; i++ { // many ms
			filler(i, old+int64(i))
		}
		if err := s.RDB.ZAdd(ctx, k.Settled, zs...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	a := s.auditor()
	rep, err := a.Run(ctx)
	if err != nil || !rep.OK {
		t.Fatalf("audit with long settled logs: %v %+v", err, rep.Problems)
	}
	var held int64
	for _, r := range rep.Rounds {
		held += r.HeldPostgres
	}
	if held != 6*3 {
		t.Fatalf("%d units held by the orders, want %d", held, 6*3)
	}
	// Two of the units of the order homed in partition 1, held in 2, go
	// back behind the shop's back: the audit names that order.
	foreign := s.SKUs[2][1]
	s.RDB.HIncrBy(ctx, s.Stock.SaleKey(foreign), "available", 2)
	s.RDB.HIncrBy(ctx, s.Stock.BuyersKey(foreign), u, -2)
	rep, err = a.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range rep.Problems {
		kinds = append(kinds, p.Kind)
		if p.Kind == "buyer" && !slices.Contains(p.OrderIDs, ids[1]) {
			t.Errorf("problem %+v: want it to name order %s", p, ids[1])
		}
	}
	sort.Strings(kinds)
	if fmt.Sprint(kinds) != "[buyer stock_postgres]" {
		t.Fatalf("problems %+v, want a buyer and a stock_postgres problem", rep.Problems)
	}
}
