package saga

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/racetest"
)

// Stock buckets on a Redis Cluster (docs/design/buckets.md): a round's
// units over buckets in several slots, each shopper's purchases decided
// by their home bucket's script, units moved in steps to a dry home.

// The oversell race over a round of 3 and 8 buckets on the 3-master
// cluster: buyers released together, more demand than units. Exactly the
// seeded units are sold, none is stranded, never more per buyer than the
// limit, the orders went to the partitions of their buckets, and
// PostgreSQL persisted every one under its CHECK.
func TestClusterBucketRaceSellsExactlyTheRound(t *testing.T) {
	t.Parallel()
	for _, buckets := range []int{3, 8} {
		t.Run(strconv.Itoa(buckets), func(t *testing.T) {
			t.Parallel()
			f := newClusterFixture(t)
			const units, buyers, tries, limit = 60, 40, 3, 2
			round := f.saleWith(t, "hot", 100, inventory.Seed{Quantity: units, PerUserLimit: limit, Buckets: buckets})
			users := ordertesting.Users(t, f.db.Pool, buyers)
			var sold, outOfStock atomic.Int64
			homes := sync.Map{}
			racetest.Together(racetest.Times(buyers, func(i int) {
				for range tries {
					p, err := f.placeRetrying(users[i], "hot", 1)
					switch {
					case err == nil:
						sold.Add(1)
						homes.Store(f.home(t, p.OrderID), true)
					case errors.Is(err, order.ErrOutOfStock):
						outOfStock.Add(1)
					case errors.Is(err, order.ErrLimitExceeded):
					default:
						t.Errorf("buyer %d: %v", i, err)
					}
				}
			})...)
			if sold.Load() != units {
				t.Fatalf("%d units sold, want all %d (out_of_stock %d times)", sold.Load(), units, outOfStock.Load())
			}
			f.checkClusterBuckets(t, "hot", buckets, units, 0)
			parts := 0
			homes.Range(func(any, any) bool { parts++; return true })
			if parts < 2 {
				t.Fatalf("the orders went to %d partition(s), want the buckets' several", parts)
			}
			f.persistAll(t)
			if got := ordertesting.Sold(t, f.db.Pool, f.stock, "hot", round); got != units {
				t.Fatalf("PostgreSQL has %d units sold, want %d", got, units)
			}
		})
	}
}

// placeRetrying places user's purchase, again while the answer is a
// retry (503: a placement that lost its races for moved units).
func (f *clusterFixture) placeRetrying(user, sku string, qty int) (order.Placed, error) {
	for {
		p, err := f.svc.Place(context.Background(), user, []order.Line{{SKU: sku, Quantity: qty}}, order.PlaceOptions{})
		if err == nil || !isRetry(err) {
			return p, err
		}
	}
}

func isRetry(err error) bool {
	return err != nil && !errors.Is(err, order.ErrOutOfStock) && !errors.Is(err, order.ErrLimitExceeded) &&
		!errors.Is(err, order.ErrSaleNotActive)
}

// Units given back on a cluster go to the buyer's home bucket and can be
// bought by a shopper homed elsewhere (a move carries them, with the
// releases PostgreSQL's CHECK must allow for): the round sells its
// quantity plus what was cancelled, and the writer persists every order.
func TestClusterBucketsResellWhatIsGivenBack(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	const units, buckets = 8, 4
	round := f.saleWith(t, "hot", 100, inventory.Seed{Quantity: units, PerUserLimit: 1, Buckets: buckets})
	users := ordertesting.Users(t, f.db.Pool, 24)
	var placed []struct{ user, id string }
	for _, u := range users {
		p, err := f.placeRetrying(u, "hot", 1)
		if errors.Is(err, order.ErrOutOfStock) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		placed = append(placed, struct{ user, id string }{u, p.OrderID})
	}
	if len(placed) != units {
		t.Fatalf("%d sold, want %d", len(placed), units)
	}
	// Three buyers cancel: their units go back to their home buckets.
	emptied := map[int]bool{}
	for _, p := range placed[:3] {
		if _, err := f.svc.Cancel(context.Background(), p.user, p.id); err != nil {
			t.Fatal(err)
		}
		emptied[inventory.HomeBucket(p.user, buckets)] = true
	}
	// New shoppers homed in the other buckets buy them back: moves bring
	// them. (The 24 above could leave fewer than three homed outside the
	// buckets given back: two runs in fifteen resold only two.)
	var resold []string
	for len(resold) < 3 {
		u := ordertesting.User(t, f.db.Pool)
		if emptied[inventory.HomeBucket(u, buckets)] {
			continue
		}
		p, err := f.placeRetrying(u, "hot", 1)
		if err != nil {
			t.Fatalf("a unit given back, bought by %s (bucket %d): %v", u, inventory.HomeBucket(u, buckets), err)
		}
		resold = append(resold, p.OrderID)
	}
	// PostgreSQL may persist the resales before the cancels: their lines
	// must carry, over their buckets, the 3 units given back.
	if seen := f.releasesSeen(t, resold, buckets); seen < 3 {
		t.Fatalf("the resold lines carry %d units given back over their buckets, want at least 3", seen)
	}
	if _, err := f.placeRetrying(users[len(users)-1], "hot", 1); !errors.Is(err, order.ErrOutOfStock) && !errors.Is(err, order.ErrLimitExceeded) {
		t.Fatalf("past the quantity plus the releases: %v, want out_of_stock", err)
	}
	f.checkClusterBuckets(t, "hot", buckets, units, 3)
	f.persistAll(t)
	// sold counts every unit ever sold; the CHECK let 3 more than the
	// quantity in because the buckets' releases were seen.
	if sold, seen := f.count(t, `SELECT sold FROM sale_rounds WHERE id = $1`, round),
		f.count(t, `SELECT released_seen FROM sale_rounds WHERE id = $1`, round); sold != units+3 || seen < 3 {
		t.Fatalf("PostgreSQL has %d units sold with %d released seen, want %d and at least 3", sold, seen, units+3)
	}
	if n := f.count(t, `SELECT count(*) FROM orders`); n != units+3 {
		t.Fatalf("PostgreSQL has %d orders, want %d", n, units+3)
	}
}

// releasesSeen is what PostgreSQL's CHECK allows for orders ids: the sum
// over the buckets of the most units given back a line from it carries.
func (f *clusterFixture) releasesSeen(t *testing.T, ids []string, buckets int) int64 {
	t.Helper()
	most := map[int]int64{}
	for _, id := range ids {
		st := f.rdb.HMGet(context.Background(), f.saga.keys.Status(id), "user_id", "items").Val()
		user, _ := st[0].(string)
		raw, _ := st[1].(string)
		var items []order.ReservedItem
		if err := json.Unmarshal([]byte(raw), &items); err != nil || len(items) != 1 || items[0].Buckets != buckets {
			t.Fatalf("order %s: items %q (%v), want one line of a round of %d buckets", id, raw, err, buckets)
		}
		b := inventory.HomeBucket(user, buckets)
		most[b] = max(most[b], items[0].Released)
	}
	var sum int64
	for _, n := range most {
		sum += n
	}
	return sum
}

// persistAll runs the writer until every partition's stream is drained.
func (f *clusterFixture) persistAll(t *testing.T) {
	t.Helper()
	w := start(f.writer())
	ordertesting.Drained(t, f.rdb, f.parts.Count(), f.saga.keys.Stream)
	w.Stop(t)
	for p := range f.parts.Count() {
		if n := f.rdb.XLen(context.Background(), f.saga.keys.Dead(p)).Val(); n != 0 {
			t.Fatalf("%d dead-lettered orders in partition %d", n, p)
		}
	}
}

// checkClusterBuckets checks every bucket of sku's round on the cluster:
// its own equation (seeded + moved_in + released = available + taken +
// moved_out, taken being its buyers' live units plus those they gave
// back), no move in flight,
// every bucket empty, and the buyers' counts summing to units.
func (f *clusterFixture) checkClusterBuckets(t *testing.T, sku string, buckets int, units, released int64) {
	t.Helper()
	ctx := context.Background()
	var taken, given int64
	for b := range buckets {
		key := f.stock.BucketKey(sku, b, buckets)
		m := f.rdb.HGetAll(ctx, key).Val()
		n := func(k string) int64 { v, _ := strconv.ParseInt(m[k], 10, 64); return v }
		var bought int64
		for _, v := range f.rdb.HVals(ctx, key+":buyers").Val() {
			c, _ := strconv.ParseInt(v, 10, 64)
			bought += c
		}
		took := bought + n("released")
		if n("seeded")+n("moved_in")+n("released") != n("available")+took+n("moved_out") || n("available") != 0 || n("moving") != 0 {
			t.Errorf("bucket %d: %v with %d taken: seeded + moved_in + released != available + taken + moved_out, units left or moving", b, m, took)
		}
		taken, given = taken+bought, given+n("released")
	}
	if taken != units || given != released {
		t.Fatalf("the buckets' buyers hold %d units and %d were given back, want %d and %d", taken, given, units, released)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// A round with a waiting room and buckets on a cluster: the room admits
// into the SKU's pass hash, and the placement copies an admitted
// shopper's pass to their home bucket, whose script checks it. Shoppers
// homed in every bucket buy with their pass; none buys without one, with
// another's, or with a made-up one, and nothing is taken for them.
func TestClusterBucketsCheckTheRoomsPass(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	c := &contract{fixture: f.fixture}
	const buckets = 3
	round := f.saleWith(t, "roomed", 100, inventory.Seed{Quantity: 30, PerUserLimit: 1, Buckets: buckets,
		Room: &inventory.RoomSettings{AdmitPerSecond: 10, PassTTL: 2 * time.Minute}})
	homes := map[int]bool{}
	var passes []string
	for len(homes) < buckets || len(passes) < 6 {
		u := f.user(t)
		pass := c.admit(t, "roomed", u, round, time.Now().Add(time.Hour))
		passes = append(passes, pass)
		homes[inventory.HomeBucket(u, buckets)] = true
		if _, err := c.buyWith(u, []string{pass}, order.Line{SKU: "roomed", Quantity: 1}); err != nil {
			t.Fatalf("an admitted shopper of bucket %d: %v", inventory.HomeBucket(u, buckets), err)
		}
		// Their pass, presented by another shopper of any bucket.
		other := f.user(t)
		if _, err := c.buyWith(other, []string{pass}, order.Line{SKU: "roomed", Quantity: 1}); !errors.Is(err, order.ErrPassRequired) {
			t.Fatalf("another's pass (bucket %d): %v, want pass_required", inventory.HomeBucket(other, buckets), err)
		}
		if _, err := c.buyWith(other, []string{"made-up"}, order.Line{SKU: "roomed", Quantity: 1}); !errors.Is(err, order.ErrPassRequired) {
			t.Fatalf("a made-up pass: %v, want pass_required", err)
		}
	}
	if got := f.available(t, "roomed"); got != int64(30-len(passes)) {
		t.Fatalf("available %d after %d admitted purchases, want %d", got, len(passes), 30-len(passes))
	}
}

// The holds and the commit of one saga agree on where each line is
// decided even when this process learns the round's buckets between
// them (another placement's refusal teaches it): a buy-now placed as
// bucket 0's, whose commit then named the buyer's real home bucket, was
// committed as a line held elsewhere that no hold took, an order with
// no unit taken for it.
func TestClusterBucketsHintLearntMidSaga(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	const buckets = 3
	f.saleWith(t, "hot", 100, inventory.Seed{Quantity: 9, Buckets: buckets})
	u := f.user(t)
	for inventory.HomeBucket(u, buckets) == 0 {
		u = f.user(t)
	}
	svc, p := f.service(Options{}, order.Options{}) // knows no buckets yet
	p.InjectFault(func(at Point) {
		if at == AfterHold {
			p.Stock.NoteBuckets("hot", buckets)
		}
	})
	if _, err := svc.Place(context.Background(), u, []order.Line{{SKU: "hot", Quantity: 1}}, order.PlaceOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.available(t, "hot"); got != 8 {
		t.Fatalf("available %d after one unit bought, want 8", got)
	}
	home := f.stock.BucketKey("hot", inventory.HomeBucket(u, buckets), buckets)
	if n, _ := f.rdb.HGet(context.Background(), home+":buyers", u).Int(); n != 1 {
		t.Fatalf("the buyer's count in their home bucket is %d, want 1", n)
	}
}
