package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/racetest"
	"github.com/shop-oss/shop/internal/testenv"
)

// Property tests of stock buckets: random interleavings of buy-nows,
// checkouts, cancels and expiries over a bucketed round and an
// unbucketed one, with every invariant checked after each step
// (docs/design/buckets.md, "Each bucket's equation").

// bucketRig is the system a bucket property test drives, on one
// topology; the checks read its buckets as the Stock names them.
type bucketRig struct {
	svc    *Service
	expiry *Expiry
	stock  *inventory.Stock
	rdb    redis.UniversalClient
	// partOf is the partition whose due set an order's expiry is claimed
	// from.
	partOf func(orderID string) int
}

// bucketTopologies are the stores the property tests run on: a single
// Redis, and a private 3-master cluster whose checkouts the saga places
// (a bucket's partition holds the lines of its shoppers).
var bucketTopologies = []struct {
	name  string
	steps int // a seed's run (a cluster's step costs more)
	rig   func(t *testing.T) *bucketRig
}{
	{"single", propStepsPerRun, func(t *testing.T) *bucketRig {
		r := testenv.NewRedis(t)
		stock := inventory.NewStock(r.Client, r.Prefix)
		log := slog.New(slog.DiscardHandler)
		return &bucketRig{
			svc:    New(nil, r.Client, stock, nil, r.Prefix, log, prometheus.NewRegistry(), Options{}),
			expiry: NewExpiry(r.Client, stock, r.Prefix, log), stock: stock, rdb: r.Client,
			partOf: func(string) int { return 0 },
		}
	}},
	{"cluster", propStepsPerRun / 2, func(t *testing.T) *bucketRig {
		c, rdb, parts := ordertesting.Cluster(t, 12)
		stock := inventory.NewPartitionedStock(rdb, c.Prefix, parts)
		log := slog.New(slog.DiscardHandler)
		return &bucketRig{
			svc:    New(nil, rdb, stock, nil, c.Prefix, log, prometheus.NewRegistry(), Options{Placer: NewSagaPlacer()}),
			expiry: NewExpiry(rdb, stock, c.Prefix, log), stock: stock, rdb: rdb,
			partOf: parts.Home, // an order's id is stamped with its home partition
		}
	}},
}

const (
	propHot, propPlain  = "hot", "plain" // bucketed, and a round of one bucket
	propHotUnits        = 20
	propPlainUnits      = 8
	propLimit           = 3
	propShoppers        = 8
	propStepsPerRun     = 300
	propConcurrentUsers = 24
)

// propOrder is an order the test placed, and whether it still holds its
// units.
type propOrder struct {
	id, user string
	lines    []Line
	live     bool
}

// propModel is what the test knows happened: the rounds, every order
// placed, and the units given back per SKU.
type propModel struct {
	mu       sync.Mutex
	buckets  map[string]int
	quantity map[string]int64
	orders   []*propOrder
	given    map[string]int64
}

func newPropModel(hotBuckets int) *propModel {
	return &propModel{buckets: map[string]int{propHot: hotBuckets, propPlain: 1},
		quantity: map[string]int64{propHot: propHotUnits, propPlain: propPlainUnits}, given: map[string]int64{}}
}

func (m *propModel) skus() []string { return []string{propHot, propPlain} }

// liveUnits is user's units of sku in live orders.
func (m *propModel) liveUnits(user, sku string) int64 {
	var n int64
	for _, o := range m.orders {
		if o.live && o.user == user {
			n += int64(quantityOf(o.lines, sku))
		}
	}
	return n
}

func (m *propModel) placed(id, user string, lines []Line) *propOrder {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := &propOrder{id: id, user: user, lines: lines, live: true}
	m.orders = append(m.orders, o)
	return o
}

// gaveBack records o's units back in the round; false if they were
// already (a second release of one order).
func (m *propModel) gaveBack(o *propOrder) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !o.live {
		return false
	}
	o.live = false
	for _, l := range o.lines {
		m.given[l.SKU] += int64(l.Quantity)
	}
	return true
}

// seedProp opens both rounds on rig.
func seedProp(t *testing.T, rig *bucketRig, m *propModel) {
	t.Helper()
	for _, sku := range m.skus() {
		r := inventory.LiveRound{Round: 1, Quantity: m.quantity[sku], PerUserLimit: propLimit, PriceCents: 250, Buckets: m.buckets[sku]}
		if err := rig.stock.OpenRound(context.Background(), sku, r); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBucketPropertiesHoldAtEveryStep runs seeded random interleavings
// one step at a time and checks every invariant after each (checkRound),
// and each answer against the model: a purchase succeeds exactly when
// every line is within the limit and the round as a whole (not the
// shopper's bucket) has the units; out_of_stock names only lines the
// round cannot serve. The seed is in the subtest's name.
func TestBucketPropertiesHoldAtEveryStep(t *testing.T) {
	t.Parallel()
	for _, top := range bucketTopologies {
		for _, buckets := range []int{1, 4, 16} {
			for _, seed := range []uint64{1, 2, 3} {
				t.Run(fmt.Sprintf("%s/buckets=%d/seed=%d", top.name, buckets, seed), func(t *testing.T) {
					t.Parallel()
					rig, m := top.rig(t), newPropModel(buckets)
					seedProp(t, rig, m)
					rng := rand.New(rand.NewPCG(seed, uint64(buckets)))
					avail := checkRound(t, rig, m, "start")
					for step := range top.steps {
						what := propStep(t, rig, m, rng, avail)
						avail = checkRound(t, rig, m, fmt.Sprintf("step %d (%s)", step, what))
						if t.Failed() {
							t.Fatalf("seed %d, buckets %d: stopped at step %d", seed, buckets, step)
						}
					}
				})
			}
		}
	}
}

// propStep runs one random operation, checking its answer against the
// model; avail is each round's units before it.
func propStep(t *testing.T, rig *bucketRig, m *propModel, rng *rand.Rand, avail map[string]int64) string {
	ctx := context.Background()
	user := "shopper-" + strconv.Itoa(rng.IntN(propShoppers))
	switch p := rng.IntN(100); {
	case p < 40:
		return propPurchase(t, rig, m, user, []Line{{propHot, 1 + rng.IntN(3)}}, avail)
	case p < 55:
		return propPurchase(t, rig, m, user, []Line{{propHot, 1 + rng.IntN(2)}, {propPlain, 1 + rng.IntN(2)}}, avail)
	case p < 60:
		return propPurchase(t, rig, m, user, []Line{{propPlain, 1 + rng.IntN(2)}}, avail)
	case len(m.orders) == 0:
		return "nothing to give back"
	case p < 80:
		o := m.orders[rng.IntN(len(m.orders))]
		_, err := rig.svc.Cancel(ctx, o.user, o.id)
		if o.live && err == nil {
			m.gaveBack(o)
		} else if o.live || (err != nil && !errors.Is(err, ErrNotCancellable)) {
			t.Errorf("cancel of %s (live %v): %v", o.id, o.live, err)
		}
		return "cancel " + o.id
	default:
		o := m.orders[rng.IntN(len(m.orders))]
		_, expired, err := rig.expiry.Expire(ctx, rig.partOf(o.id), o.id)
		if err != nil || expired != o.live {
			t.Errorf("expiry of %s (live %v): expired %v, %v", o.id, o.live, expired, err)
		}
		if expired {
			m.gaveBack(o)
		}
		return "expire " + o.id
	}
}

// propPurchase places lines for user and checks the answer: the model
// decides it, as the round's units before the step and the shopper's
// live units tell.
func propPurchase(t *testing.T, rig *bucketRig, m *propModel, user string, lines []Line, avail map[string]int64) string {
	var short, over []string
	for _, l := range lines {
		if avail[l.SKU] < int64(l.Quantity) {
			short = append(short, l.SKU)
		}
		if m.liveUnits(user, l.SKU)+int64(l.Quantity) > propLimit {
			over = append(over, l.SKU)
		}
	}
	p, err := rig.svc.Place(context.Background(), user, lines, PlaceOptions{})
	what := fmt.Sprintf("%s buys %v: %v", user, lines, err)
	switch {
	case err == nil && len(short) == 0 && len(over) == 0:
		m.placed(p.OrderID, user, lines)
	case errors.Is(err, ErrOutOfStock) && len(short) > 0:
		for _, sku := range namedSKUs(err) {
			if !slices.Contains(short, sku) {
				t.Errorf("%s: out_of_stock names %s, whose round had %d units", what, sku, avail[sku])
			}
		}
	case errors.Is(err, ErrLimitExceeded) && len(over) > 0:
	default:
		t.Errorf("%s; want short %v, over the limit %v (the rounds had %v)", what, short, over, avail)
	}
	return what
}

// namedSKUs are the SKUs an out_of_stock answer names.
func namedSKUs(err error) []string {
	var e *apperr.Error
	if !errors.As(err, &e) {
		return nil
	}
	skus, _ := e.Extra["skus"].([]string)
	return skus
}

// propBucket is one bucket as read.
type propBucket struct {
	sale   map[string]string
	buyers map[string]string
}

func (b propBucket) n(field string) int64 { v, _ := strconv.ParseInt(b.sale[field], 10, 64); return v }

// readBuckets reads every bucket of sku's round of buckets in one
// pipeline (the test's steps are over when it runs).
func readBuckets(t *testing.T, rig *bucketRig, sku string, buckets int) []propBucket {
	t.Helper()
	ctx := context.Background()
	pipe := rig.rdb.Pipeline()
	sales, buyers := make([]*redis.MapStringStringCmd, buckets), make([]*redis.MapStringStringCmd, buckets)
	for b := range buckets {
		sales[b] = pipe.HGetAll(ctx, rig.stock.BucketKey(sku, b, buckets))
		buyers[b] = pipe.HGetAll(ctx, rig.stock.BucketBuyersKey(sku, b, buckets))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("read the buckets of %s: %v", sku, err)
	}
	out := make([]propBucket, buckets)
	for b := range out {
		out[b] = propBucket{sale: sales[b].Val(), buyers: buyers[b].Val()}
	}
	return out
}

// checkRound checks every invariant of both rounds against the model
// and returns each round's available units (summed over its buckets).
func checkRound(t *testing.T, rig *bucketRig, m *propModel, when string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, sku := range m.skus() {
		bs := readBuckets(t, rig, sku, m.buckets[sku])
		var avail, released, live int64
		taken := make([]int64, len(bs))
		for _, o := range m.orders {
			n := int64(quantityOf(o.lines, sku))
			taken[inventory.HomeBucket(o.user, len(bs))] += n
			if o.live {
				live += n
			}
		}
		for b, bk := range bs {
			avail, released = avail+bk.n("available"), released+bk.n("released")
			checkBucket(t, m, sku, b, bk, taken[b], when)
		}
		if avail+live != m.quantity[sku] || released != m.given[sku] {
			t.Errorf("%s: %s: available %d + live orders' %d != quantity %d, or released %d != %d given back",
				when, sku, avail, live, m.quantity[sku], released, m.given[sku])
		}
		checkBuyers(t, m, sku, bs, when)
		out[sku] = avail
	}
	return out
}

// checkBucket checks bucket b's own equation, seeded + moved_in +
// released = available + taken + moved_out (a round of one bucket: its
// quantity seeded, no moves), and that it is not negative.
func checkBucket(t *testing.T, m *propModel, sku string, b int, bk propBucket, taken int64, when string) {
	t.Helper()
	seeded := bk.n("seeded")
	if len(bk.sale) > 0 && m.buckets[sku] == 1 {
		seeded = m.quantity[sku]
	}
	if bk.n("available") < 0 || seeded+bk.n("moved_in")+bk.n("released") != bk.n("available")+taken+bk.n("moved_out") {
		t.Errorf("%s: %s bucket %d: %v, taken %d: seeded + moved_in + released != available + taken + moved_out, or negative",
			when, sku, b, bk.sale, taken)
	}
}

// checkBuyers checks that each bucket counts exactly its own shoppers'
// live units, within the limit, and every shopper with live units is
// counted.
func checkBuyers(t *testing.T, m *propModel, sku string, bs []propBucket, when string) {
	t.Helper()
	counted := map[string]bool{}
	for b, bk := range bs {
		for user, v := range bk.buyers {
			n, _ := strconv.ParseInt(v, 10, 64)
			counted[user] = true
			if home := inventory.HomeBucket(user, len(bs)); home != b || n != m.liveUnits(user, sku) || n > propLimit {
				t.Errorf("%s: %s bucket %d counts %d units of %s (home %d, live %d, limit %d)",
					when, sku, b, n, user, home, m.liveUnits(user, sku), propLimit)
			}
		}
	}
	for _, o := range m.orders {
		if o.live && quantityOf(o.lines, sku) > 0 && !counted[o.user] {
			t.Errorf("%s: %s: %s holds live units no bucket counts", when, sku, o.user)
		}
	}
}

// The same properties under concurrency: shoppers released together over
// the buckets buy, check out, cancel their own orders and expire anyone's
// (a cancel and an expiry of one order race, and exactly one wins). The
// round's totals and every bucket's equation are checked exactly after,
// and then the units left are bought one by one: none is stranded.
func TestBucketPropertiesHoldUnderRace(t *testing.T) {
	t.Parallel()
	for _, top := range bucketTopologies {
		for _, buckets := range []int{4, 16} {
			t.Run(fmt.Sprintf("%s/buckets=%d", top.name, buckets), func(t *testing.T) {
				t.Parallel()
				rig, m := top.rig(t), newPropModel(buckets)
				seedProp(t, rig, m)
				racetest.Together(racetest.Times(propConcurrentUsers, func(i int) {
					racer(t, rig, m, "racer-"+strconv.Itoa(i), rand.New(rand.NewPCG(uint64(i), uint64(buckets))))
				})...)
				avail := checkRound(t, rig, m, "after the race")
				for i := 0; avail[propHot] > 0; i++ {
					user := "late-" + strconv.Itoa(i)
					propPurchase(t, rig, m, user, []Line{{propHot, 1}}, avail)
					avail = checkRound(t, rig, m, "buying what is left, "+user)
					if t.Failed() || i > propHotUnits {
						t.Fatalf("%d units left after %d late purchases", avail[propHot], i)
					}
				}
			})
		}
	}
}

// racer is one shopper of the race: a few random steps.
func racer(t *testing.T, rig *bucketRig, m *propModel, user string, rng *rand.Rand) {
	ctx := context.Background()
	var mine []*propOrder
	for range 12 {
		switch p := rng.IntN(100); {
		case p < 55:
			lines := []Line{{propHot, 1 + rng.IntN(2)}}
			if p < 15 {
				lines = append(lines, Line{propPlain, 1})
			}
			if id, ok := racePlace(t, rig, user, lines); ok {
				mine = append(mine, m.placed(id, user, lines))
			}
		case p < 80 && len(mine) > 0:
			o := mine[rng.IntN(len(mine))]
			if _, err := rig.svc.Cancel(ctx, user, o.id); err == nil {
				m.gaveBack(o) // a repeat of a cancel answers ok and gives nothing
			} else if !errors.Is(err, ErrNotCancellable) {
				t.Errorf("cancel: %v", err)
			}
		default:
			m.mu.Lock()
			n := len(m.orders)
			var o *propOrder
			if n > 0 {
				o = m.orders[rng.IntN(n)]
			}
			m.mu.Unlock()
			if o == nil {
				continue
			}
			_, expired, err := rig.expiry.Expire(ctx, rig.partOf(o.id), o.id)
			if err != nil {
				t.Errorf("expire: %v", err)
			} else if expired && !m.gaveBack(o) {
				t.Errorf("order %s given back twice", o.id)
			}
		}
	}
}

// racePlace places lines, trying again while the answer is a retry
// (late, or too many lost races for moved units): ok when it placed.
// A retry is answered only after others bought (each lost race is
// another's sale), so a few tries end it; many mean units do not move.
func racePlace(t *testing.T, rig *bucketRig, user string, lines []Line) (string, bool) {
	for range 50 {
		p, err := rig.svc.Place(context.Background(), user, lines, PlaceOptions{})
		switch {
		case err == nil:
			return p.OrderID, true
		case errors.Is(err, ErrOutOfStock), errors.Is(err, ErrLimitExceeded):
			return "", false
		case !errors.Is(err, errLate) && !errors.Is(err, errBucketsBusy):
			t.Errorf("place %v: %v", lines, err)
			return "", false
		}
	}
	t.Errorf("place %v: still a retry after 50 tries", lines)
	return "", false
}
