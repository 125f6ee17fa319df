package saga

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shop-oss/shop/internal/order"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/outage"
)

// checkFixture is a checkout refused on a foreign shard (c sold out,
// partition 9) after a hold on another (b, partition 5), so that its home's
// step (a, partition 1) only checks: each on its own master. home is the
// home's master.
type checkFixture struct {
	*clusterFixture
	user    string
	a, b, c string
	lines   []order.Line
	home    *redis.Client
}

func newCheckFixture(t *testing.T) *checkFixture {
	t.Helper()
	f := newClusterFixture(t)
	ctx := context.Background()
	x := &checkFixture{clusterFixture: f}
	x.a, x.b, x.c = f.skuIn(t, "chk", 1, 10), f.skuIn(t, "chk", 5, 10), f.skuIn(t, "chk", 9, 1)
	x.lines = []order.Line{{SKU: x.a, Quantity: 2}, {SKU: x.b, Quantity: 3}, {SKU: x.c, Quantity: 2}}
	masters := map[string]bool{}
	for _, sku := range []string{x.a, x.b, x.c} {
		m, err := f.rdb.MasterForKey(ctx, f.stock.SaleKey(sku))
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		if sku == x.a {
			x.home = m
		}
	}
	if len(masters) != 3 {
		t.Fatalf("partitions 1, 5 and 9 on %d masters, want 3", len(masters))
	}
	// A buyer whose own slot (the Idempotency-Key's) is not on the home's
	// master, so that only the home's step meets its outage.
	for x.user == "" {
		u := f.user(t)
		m, err := f.rdb.MasterForKey(ctx, f.saga.keys.Idem(u, "chk"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr != x.home.Options().Addr {
			x.user = u
		}
	}
	return x
}

// refuseWrites makes the home's master refuse every script that may write
// (maxmemory reached: OOM), the commit's check among them; allowWrites
// lifts it.
func (x *checkFixture) refuseWrites(t *testing.T) {
	t.Helper()
	if err := x.home.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.home.ConfigSet(context.Background(), "maxmemory", "0") })
}

func (x *checkFixture) allowWrites(t *testing.T) {
	t.Helper()
	if err := x.home.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
}

// untouched fails unless the stock and buyer counts are as the sales
// opened them, and no hold or order event is left.
func (x *checkFixture) untouched(t *testing.T, when string) {
	t.Helper()
	for sku, want := range map[string]int64{x.a: 10, x.b: 10, x.c: 1} {
		if av := x.available(t, sku); av != want {
			t.Fatalf("%s: %s available %d, want %d", when, sku, av, want)
		}
		if n := x.rdb.HLen(context.Background(), x.stock.BuyersKey(sku)).Val(); n != 0 {
			t.Fatalf("%s: %s counts %d buyers", when, sku, n)
		}
	}
	x.noHolds(t)
	if ev := x.events(t); len(ev) != 0 {
		t.Fatalf("%s: order events %v", when, ev)
	}
}

// wantRefusal fails unless err is the refusal a single Redis gives the
// checkout: out of stock, for c.
func (x *checkFixture) wantRefusal(t *testing.T, err error) {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.CodeOutOfStock || fmt.Sprint(e.Extra["skus"]) != fmt.Sprint([]string{x.c}) {
		t.Fatalf("answer %v, want out of stock for %s", err, x.c)
	}
}

// A checkout refused on a foreign shard whose home then cannot check (its
// master refuses scripts: an outage) is answered 503, and the hold taken
// on the second shard goes back at once, not at the repair's deadline: a
// check writes nothing, so no order can follow. The repeat of its
// Idempotency-Key once the home is back gets the refusal a single Redis
// gives, rather than meeting the first run's hold (busy, 503).
func TestFailedCheckGivesTheHoldsBackAtOnce(t *testing.T) {
	t.Parallel()
	x := newCheckFixture(t)
	ctx := context.Background()
	x.refuseWrites(t)
	_, err := x.svc.Place(ctx, x.user, x.lines, order.PlaceOptions{IdemKey: "chk"})
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.CodeUnavailable || !outage.Is(err) {
		t.Fatalf("checkout while its home refuses scripts: %v, want an outage (503)", err)
	}
	x.untouched(t, "after the failed check")
	x.allowWrites(t)

	_, err = x.svc.Place(ctx, x.user, x.lines, order.PlaceOptions{IdemKey: "chk"})
	x.wantRefusal(t, err)
	x.untouched(t, "after the repeat")
	// The repair finds nothing left to settle.
	if _, err := x.clusterSweeper().Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	x.untouched(t, "after a sweep")
}

// beforeCheck runs its hook once, just before the first commit script in
// check mode reaches Redis (as late as a repair or an outage can come).
type beforeCheck struct {
	redis.Scripter
	once sync.Once
	hook func(id string)
}

func (b *beforeCheck) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	b.seen(args)
	return b.Scripter.Eval(ctx, script, keys, args...)
}

func (b *beforeCheck) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if sha == redis.NewScript(order.Kit{}.Script(commitLua)).Hash() {
		b.seen(args)
	}
	return b.Scripter.EvalSha(ctx, sha, keys, args...)
}

// seen runs the hook for a commit's arguments in check mode (ARGV[7]).
func (b *beforeCheck) seen(args []any) {
	if len(args) > 6 && args[6] == "check" {
		b.once.Do(func() { b.hook(args[0].(string)) })
	}
}

// The repair settles the hold first (the request was slow past its
// deadline: a tombstone on the home, the units back), then the home's
// check fails: the saga's own release finds the hold gone and gives
// nothing back twice, and the tombstone stays, so the repeat of the
// Idempotency-Key starts a fresh order and gets the refusal.
func TestFailedCheckAfterTheRepairReleasesNothingTwice(t *testing.T) {
	t.Parallel()
	x := newCheckFixture(t)
	ctx := context.Background()
	var id string
	hooked := &beforeCheck{Scripter: x.rdb, hook: func(order string) {
		id = order
		if err := x.rdb.ZAdd(ctx, x.saga.keys.Holds(5), redis.Z{Score: 1, Member: order}).Err(); err != nil {
			t.Error(err)
		}
		if _, err := x.clusterSweeper().Sweep(ctx); err != nil {
			t.Error(err)
		}
		x.refuseWrites(t)
	}}
	svc, _ := x.service(Options{}, order.Options{ReserveRedis: hooked})
	_, err := svc.Place(ctx, x.user, x.lines, order.PlaceOptions{IdemKey: "chk"})
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.CodeUnavailable || !outage.Is(err) || id == "" {
		t.Fatalf("checkout whose home fails its check after the repair: %v (order %q), want an outage (503)", err, id)
	}
	x.untouched(t, "after the repair and the failed check")
	if st := x.rdb.HGet(ctx, x.saga.keys.Status(id), "status").Val(); st != order.StatusAborted {
		t.Fatalf("status of the repaired order %q, want its tombstone", st)
	}
	x.allowWrites(t)

	_, err = svc.Place(ctx, x.user, x.lines, order.PlaceOptions{IdemKey: "chk"})
	x.wantRefusal(t, err)
	x.untouched(t, "after the repeat")
	if st := x.rdb.HGet(ctx, x.saga.keys.Status(id), "status").Val(); st != order.StatusAborted {
		t.Fatalf("status of the repaired order %q after the repeat, want its tombstone", st)
	}
}
