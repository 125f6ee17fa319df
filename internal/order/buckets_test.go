package order

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/racetest"
	"github.com/shop-oss/shop/internal/testenv"
)

// newReserveFixtureOn is newReserveFixture on r: another process of the
// same shop.
func newReserveFixtureOn(t testing.TB, r *testenv.Redis) *reserveFixture {
	t.Helper()
	stock := inventory.NewStock(r.Client, r.Prefix)
	svc := New(nil, r.Client, stock, nil, r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), Options{})
	return &reserveFixture{Stock: stock, svc: svc, r: r}
}

// The oversell race over a round split in buckets, on a single Redis:
// buyers released together, each trying several times, more demand than
// units. Exactly the seeded units are sold (so none is stranded in a
// bucket its shoppers left), every bucket ends empty, never more per
// buyer than the limit, one event per sale.
func TestBucketRaceSellsExactlyTheRound(t *testing.T) {
	t.Parallel()
	for _, buckets := range []int{4, 16} {
		t.Run(strconv.Itoa(buckets), func(t *testing.T) {
			t.Parallel()
			f := newReserveFixture(t)
			const units, users, tries, limit = 100, 80, 3, 2
			f.seed(t, "hot", inventory.LiveRound{Quantity: units, PerUserLimit: limit, Buckets: buckets})
			f.race(t, "hot", units, users, tries, limit, func(user string) error {
				_, err := f.svc.Place(context.Background(), user, []Line{{"hot", 1}}, PlaceOptions{})
				// A loaded host may answer late, or after too many lost
				// races for moved units: nothing was bought, and a client
				// tries again.
				for isRetry(err) {
					_, err = f.svc.Place(context.Background(), user, []Line{{"hot", 1}}, PlaceOptions{})
				}
				return err
			})
			f.checkBuckets(t, "hot", buckets, units)
		})
	}
}

// isRetry tells a 503 (a placement late on a loaded host, or out of
// tries for moved units, or a step past its deadline): nothing was
// bought, and a client tries again.
func isRetry(err error) bool {
	var e *apperr.Error
	return errors.Is(err, errLate) || errors.As(err, &e) && e.Code == apperr.CodeUnavailable
}

// One shopper can buy every unit of a round of 4 buckets, three quarters
// of them seeded in buckets that are not theirs; out_of_stock comes only
// when the round as a whole is empty.
func TestBucketsStrandNoUnit(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "hot", inventory.LiveRound{Quantity: 9, Buckets: 4})
	ctx := context.Background()
	for i := range 4 {
		if _, err := f.svc.Place(ctx, "solo", []Line{{"hot", 2}}, PlaceOptions{}); err != nil {
			t.Fatalf("purchase %d of 2 units: %v", i+1, err)
		}
	}
	if _, err := f.svc.Place(ctx, "solo", []Line{{"hot", 2}}, PlaceOptions{}); !errors.Is(err, ErrOutOfStock) {
		t.Fatalf("2 units with 1 left in the round: %v, want out_of_stock", err)
	}
	if _, err := f.svc.Place(ctx, "solo", []Line{{"hot", 1}}, PlaceOptions{}); err != nil {
		t.Fatalf("the last unit: %v", err)
	}
	f.checkBuckets(t, "hot", 4, 9)
}

// checkBuckets checks each bucket's own equation, seeded + moved_in =
// available + taken + moved_out (taken: its buyers' counts, with no
// release), that every bucket is empty, and that the buyers' counts sum
// to the round's units.
func (f *reserveFixture) checkBuckets(t *testing.T, sku string, buckets int, units int64) {
	t.Helper()
	ctx := context.Background()
	var taken int64
	for b := range buckets {
		key := f.BucketKey(sku, b, buckets)
		m := f.r.Client.HGetAll(ctx, key).Val()
		n := func(k string) int64 { v, _ := strconv.ParseInt(m[k], 10, 64); return v }
		var bought int64
		for _, v := range f.r.Client.HVals(ctx, key+":buyers").Val() {
			c, _ := strconv.ParseInt(v, 10, 64)
			bought += c
		}
		if n("seeded")+n("moved_in") != n("available")+bought+n("moved_out") || n("available") != 0 {
			t.Errorf("bucket %d: %v with %d bought: seeded + moved_in != available + bought + moved_out, or units left", b, m, bought)
		}
		taken += bought
	}
	if taken != units {
		t.Fatalf("the buckets' buyers hold %d units, want %d", taken, units)
	}
}

// A process whose picture of the round's buckets is stale (the round was
// reseeded with fewer) still counts a shopper in the home bucket only:
// the script refuses the wrong bucket, so the limit holds across
// processes.
func TestStaleBucketGuessKeepsTheLimit(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	ctx := context.Background()
	user := ""
	for i := 0; user == ""; i++ {
		u := "u" + strconv.Itoa(i)
		if h := inventory.HomeBucket(u, 4); h < 3 && h != inventory.HomeBucket(u, 3) {
			user = u
		}
	}
	f.seed(t, "hot", inventory.LiveRound{Quantity: 40, PerUserLimit: 1, Buckets: 4})
	if _, err := f.LearnBuckets(ctx, "hot"); err != nil { // this process: 4 buckets
		t.Fatal(err)
	}
	other := newReserveFixtureOn(t, f.r) // another process, told nothing yet
	other.seed(t, "hot", inventory.LiveRound{Round: 2, Quantity: 40, PerUserLimit: 1, Buckets: 3})
	if _, err := f.svc.Place(ctx, user, []Line{{"hot", 1}}, PlaceOptions{}); err != nil {
		t.Fatalf("first purchase, with a stale guess of 4 buckets: %v", err)
	}
	if _, err := other.svc.Place(ctx, user, []Line{{"hot", 1}}, PlaceOptions{}); !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("second purchase in another process: %v, want limit_exceeded", err)
	}
}

// A process that knew a round of 4 buckets still sells to a shopper
// homed in a bucket the reseeding removed (the round now has fewer): the
// missing bucket is a stale guess to learn from, not a SKU without a
// sale.
func TestStaleGuessOfARemovedBucketStillSells(t *testing.T) {
	t.Parallel()
	for _, now := range []int{1, 3} {
		t.Run(strconv.Itoa(now), func(t *testing.T) {
			t.Parallel()
			f := newReserveFixture(t)
			ctx := context.Background()
			user := ""
			for i := 0; user == ""; i++ {
				if u := "u" + strconv.Itoa(i); inventory.HomeBucket(u, 4) == 3 {
					user = u
				}
			}
			f.seed(t, "hot", inventory.LiveRound{Quantity: 40, Buckets: 4})
			if _, err := f.LearnBuckets(ctx, "hot"); err != nil { // this process: 4 buckets
				t.Fatal(err)
			}
			other := newReserveFixtureOn(t, f.r)
			other.seed(t, "hot", inventory.LiveRound{Round: 2, Quantity: 40, Buckets: now})
			if _, err := f.svc.Place(ctx, user, []Line{{"hot", 1}}, PlaceOptions{}); err != nil {
				t.Fatalf("purchase homed in bucket 3 of a stale 4, the round now of %d: %v", now, err)
			}
			if got := f.BucketsHint("hot"); got != now {
				t.Fatalf("the process now guesses %d buckets, want %d", got, now)
			}
		})
	}
}

// A cancel gives the buyer's count back in their home bucket, where every
// purchase of theirs counts it: a shopper at the limit who cancels may
// buy again (with the count lowered in bucket 0 instead, the limit would
// still refuse them). The units go back to the round, and the other
// buckets' shoppers can buy them. A process that never learnt the
// round's buckets cancels as well as the one that placed the order.
func TestCancelGivesTheCountBackInTheHomeBucket(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	other := newReserveFixtureOn(t, f.r) // knows nothing of the buckets
	const buckets, limit = 4, 2
	f.seed(t, "hot", inventory.LiveRound{Quantity: 8, PerUserLimit: limit, Buckets: buckets})
	ctx := context.Background()
	var user string // homed past bucket 0, where the two counts differ
	for i := 0; user == ""; i++ {
		if u := "shopper-" + strconv.Itoa(i); inventory.HomeBucket(u, buckets) != 0 {
			user = u
		}
	}
	for i, svc := range []*Service{f.svc, other.svc} {
		p, err := f.svc.Place(ctx, user, []Line{{"hot", limit}}, PlaceOptions{})
		if err != nil {
			t.Fatalf("purchase %d: %v", i+1, err)
		}
		if _, err := svc.Cancel(ctx, user, p.OrderID); err != nil {
			t.Fatalf("cancel %d: %v", i+1, err)
		}
	}
	if _, err := f.svc.Place(ctx, user, []Line{{"hot", limit}}, PlaceOptions{}); err != nil {
		t.Fatalf("buy again after two cancels: %v", err)
	}
	if _, err := f.svc.Place(ctx, user, []Line{{"hot", 1}}, PlaceOptions{}); !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("a unit past the limit: %v, want limit_exceeded", err)
	}
	home := inventory.HomeBucket(user, buckets)
	for b := range buckets {
		n, _ := f.r.Client.HGet(ctx, f.BucketBuyersKey("hot", b, buckets), user).Int()
		if want := map[bool]int{true: limit, false: 0}[b == home]; n != want {
			t.Errorf("bucket %d counts %d units of the shopper, want %d", b, n, want)
		}
	}
	// Everyone else buys the other 6, the 4 given back among them.
	for i := 0; ; i++ {
		_, err := f.svc.Place(ctx, "other-"+strconv.Itoa(i), []Line{{"hot", 1}}, PlaceOptions{})
		if errors.Is(err, ErrOutOfStock) {
			if i != 6 {
				t.Fatalf("out of stock after %d more units, want 6", i)
			}
			break
		}
		if err != nil {
			t.Fatalf("unit %d: %v", i+1, err)
		}
	}
}

// The cancel race over a round of 4 buckets: every shopper, released
// together, buys one unit, cancels it and buys up to the limit. Exactly
// the round's units are held at the end (none lost or made by the
// cancels), each shopper's count is in their home bucket only and within
// the limit, and the round's releases are exactly the cancelled units.
func TestBucketCancelRaceKeepsTheRoundExact(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	const buckets, units, users, limit = 4, 40, 30, 2
	f.seed(t, "hot", inventory.LiveRound{Quantity: units, PerUserLimit: limit, Buckets: buckets})
	ctx := context.Background()
	place := func(user string, qty int) (Placed, error) {
		p, err := f.svc.Place(ctx, user, []Line{{"hot", qty}}, PlaceOptions{})
		for isRetry(err) {
			p, err = f.svc.Place(ctx, user, []Line{{"hot", qty}}, PlaceOptions{})
		}
		return p, err
	}
	var cancelled atomic.Int64
	racetest.Together(racetest.Times(users, func(i int) {
		user := "racer-" + strconv.Itoa(i)
		if p, err := place(user, 1); err == nil {
			if _, err := f.svc.Cancel(ctx, user, p.OrderID); err != nil {
				t.Errorf("cancel: %v", err)
			} else {
				cancelled.Add(1)
			}
		}
		for range limit + 1 {
			_, _ = place(user, 1)
		}
	})...)
	var available, held, released int64
	for b := range buckets {
		m := f.r.Client.HGetAll(ctx, f.BucketKey("hot", b, buckets)).Val()
		a, _ := strconv.ParseInt(m["available"], 10, 64)
		r, _ := strconv.ParseInt(m["released"], 10, 64)
		available, released = available+a, released+r
		for user, v := range f.r.Client.HGetAll(ctx, f.BucketBuyersKey("hot", b, buckets)).Val() {
			n, _ := strconv.ParseInt(v, 10, 64)
			if inventory.HomeBucket(user, buckets) != b || n > limit || n < 1 {
				t.Errorf("bucket %d counts %d units of %s (home %d)", b, n, user, inventory.HomeBucket(user, buckets))
			}
			held += n
		}
	}
	if available+held != units || released != cancelled.Load() || cancelled.Load() == 0 {
		t.Fatalf("available %d + held %d, want %d; released %d, cancelled %d", available, held, units,
			released, cancelled.Load())
	}
}

// A shopper whose home bucket was dry while they were within the limit,
// and whom a purchase of theirs then put at it while the round sold out,
// is answered limit_exceeded by the move's retry, not out_of_stock: the
// limit outranks the stock, as on a round of one bucket (the move itself
// does not read the shopper's count).
func TestDryHomeAtTheLimitAnswersTheLimit(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	const buckets, limit = 4, 2
	f.seed(t, "hot", inventory.LiveRound{Quantity: 6, PerUserLimit: limit, Buckets: buckets})
	ctx := context.Background()
	if _, err := f.svc.Place(ctx, "first", []Line{{"hot", limit}}, PlaceOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // the rest of the round, to shoppers not at the limit
		if _, err := f.svc.Place(ctx, "other-"+strconv.Itoa(i), []Line{{"hot", 1}}, PlaceOptions{}); errors.Is(err, ErrOutOfStock) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// Where the race leaves it: "first" asked for a unit while their home
	// was dry and they held fewer; now they hold the limit, the round none.
	if err := f.svc.moveUnits(ctx, "first", []Line{{"hot", 1}}, []string{"hot"}); !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("move for a shopper at the limit in a sold-out round: %v, want limit_exceeded", err)
	}
	if err := f.svc.moveUnits(ctx, "other-0", []Line{{"hot", 1}}, []string{"hot"}); !errors.Is(err, ErrOutOfStock) {
		t.Fatalf("move for a shopper within the limit in a sold-out round: %v, want out_of_stock", err)
	}
}
