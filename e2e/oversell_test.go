package e2e

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shop-oss/shop/internal/loadtest"
	"github.com/shop-oss/shop/internal/testenv"
)

// The no-oversell suite: buyers released together against the built binary;
// afterwards Redis (sold, available), PostgreSQL (rows, the round's sold
// count) and the answers the buyers got must agree exactly.

// sale is the tally of one attack.
type sale struct {
	mu       sync.Mutex
	units    map[string]int // accepted order id → units
	perBuyer map[int]int    // buyer → units accepted
	refused  map[string]int // problem code → count
	bad      []string       // anything else
	repeated []string       // order ids answered to two purchases
	paid     []string       // order ids answered paid
	// unknown counts purchases left with a 5xx: each may have bought
	// unseen (every 5xx, retried or not, is in the shop's watch).
	unknown int
}

func newSale() *sale {
	return &sale{units: map[string]int{}, perBuyer: map[int]int{}, refused: map[string]int{}}
}

func (s *sale) add(buyer, qty int, o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch o.status {
	case http.StatusAccepted:
		if _, dup := s.units[o.orderID]; dup {
			s.repeated = append(s.repeated, o.orderID)
		}
		s.units[o.orderID] = qty
		s.perBuyer[buyer] += qty
	case http.StatusConflict:
		s.refused[o.code]++
	case http.StatusServiceUnavailable, http.StatusInternalServerError:
		s.unknown++
	default:
		s.bad = append(s.bad, strconv.Itoa(o.status)+" "+o.code)
	}
}

// answers is the tally as the invariant check takes it.
func (s *sale) answers() loadtest.Answers {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := loadtest.Answers{Accepted: map[string]int64{}, Repeated: s.repeated, Unknown: s.unknown, Paid: s.paid}
	for id, q := range s.units {
		a.Accepted[id] = int64(q)
	}
	return a
}

// merge adds another attack's tally of the same sale.
func (s *sale) merge(o *sale) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, q := range o.units {
		if _, dup := s.units[id]; dup {
			s.repeated = append(s.repeated, id)
		}
		s.units[id] = q
	}
	for b, n := range o.perBuyer {
		s.perBuyer[b] += n
	}
	for c, n := range o.refused {
		s.refused[c] += n
	}
	s.repeated = append(s.repeated, o.repeated...)
	s.unknown += o.unknown
}

func (s *sale) accepted() (orders, units int) {
	for _, q := range s.units {
		orders++
		units += q
	}
	return orders, units
}

// attack releases every buyer at once; each runs its own attempts in turn.
func attack(t *testing.T, buyers int, buy func(buyer, attempt int) (qty int, o outcome), attempts int) *sale {
	t.Helper()
	tally := newSale()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for b := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for a := range attempts {
				qty, o := buy(b, a)
				tally.add(b, qty, o)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(tally.bad) > 0 {
		t.Fatalf("unexpected answers: %v", tally.bad[:min(len(tally.bad), 10)])
	}
	return tally
}

// verify checks that the sale sold out exactly, waits for the writer, and
// ends with the invariant check (I1–I7).
func verify(t *testing.T, s *shop, dbURL, sku string, seeded int, tally *sale, limit int) {
	t.Helper()
	orders, units := tally.accepted()
	if units != seeded {
		t.Fatalf("accepted %d units in %d orders, seeded %d (refused %v)", units, orders, seeded, tally.refused)
	}
	if limit > 0 {
		for b, n := range tally.perBuyer {
			if n > limit {
				t.Fatalf("buyer %d got %d units, limit %d", b, n, limit)
			}
		}
	}
	rep := s.waitConfirmed(t, sku, int64(seeded))
	if rep.Sold != int64(seeded) || rep.Available != 0 || rep.Confirmed != int64(seeded) {
		t.Fatalf("stock %+v, want sold = confirmed = %d, available 0", rep, seeded)
	}
	rows, rowUnits, distinct := orderRows(t, dbURL, sku)
	if rows != orders || rowUnits != units || distinct != orders {
		t.Fatalf("PostgreSQL holds %d rows (%d distinct, %d units); buyers were told %d orders, %d units",
			rows, distinct, rowUnits, orders, units)
	}
	s.check(t, sku, seeded, limit, tally)
}

// orderRows reads PostgreSQL directly: the rows, their units, and how many
// distinct order ids (a duplicate would be counted twice in rows).
func orderRows(t *testing.T, dbURL, sku string) (rows, units, distinct int) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = pool.QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(quantity), 0), count(DISTINCT order_id) FROM order_items WHERE sku = $1`, sku).
		Scan(&rows, &units, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	return rows, units, distinct
}

// 2,000 buyers × 3 attempts for 100 units, one per buyer.
func TestNoOversellTwoThousandBuyers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e)
	const units, buyers, tries = 100, 2000, 3
	s.product(t, "hot-2k", 500, map[string]any{"quantity": units, "per_user_limit": 1})
	tokens := s.shoppers(t, buyers, "2k")
	tally := attack(t, buyers, func(b, a int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], "hot-2k", 1, "a"+strconv.Itoa(a))
	}, tries)
	verify(t, s, e["SHOP_DATABASE_URL"], "hot-2k", units, tally, 1)
	if tally.refused["out_of_stock"] == 0 || tally.refused["limit_exceeded"] == 0 {
		t.Errorf("refusals %v: expected both sold-out and over-limit answers", tally.refused)
	}
}

// 20 buyers with no limit buying 1 to 3 units at a time, until nothing is
// left of 10 units: multi-unit reservations never overshoot, with the
// round in one stock bucket or split over 4 or 16 (units moved to dry
// homes as they run out), on one Redis and on a 3-master cluster (the
// buckets on several masters, moved in three steps; fewer tries there).
func TestNoOversellMultiUnit(t *testing.T) {
	t.Parallel()
	topologies := []struct {
		name  string
		env   func(t *testing.T) env
		tries int
	}{
		{"", newEnv, 6},
		{"cluster ", func(t *testing.T) env { return clusterEnvOn(t, testenv.StartCluster(t, 3)) }, 3},
	}
	for _, top := range topologies {
		for _, buckets := range []int{1, 4, 16} {
			t.Run(top.name+"buckets "+strconv.Itoa(buckets), func(t *testing.T) {
				t.Parallel()
				multiUnitSale(t, top.env(t), buckets, top.tries)
			})
		}
	}
}

func multiUnitSale(t *testing.T, e env, buckets, tries int) {
	s := newShop(t, e)
	const units, buyers = 10, 20
	s.product(t, "hot-multi", 700, map[string]any{"quantity": units, "per_user_limit": 0, "buckets": buckets})
	tokens := s.shoppers(t, buyers, "multi")
	tally := attack(t, buyers, func(b, a int) (int, outcome) {
		qty := 1 + rand.IntN(3)
		return qty, s.purchase(t, tokens[b], "hot-multi", qty, "m"+strconv.Itoa(a))
	}, tries)
	// A 3-unit request cannot take the last unit or two: sweep them up one
	// at a time, so the sale ends sold out whatever the random sizes were.
	for i := 0; ; i++ {
		o := s.purchase(t, tokens[0], "hot-multi", 1, "sweep"+strconv.Itoa(i))
		tally.add(0, 1, o)
		if o.status != http.StatusAccepted {
			break
		}
	}
	verify(t, s, e["SHOP_DATABASE_URL"], "hot-multi", units, tally, 0)
}

// Two `shop serve` processes (each with its own order writer) share Redis
// and PostgreSQL and take the same sale, its round in one stock bucket
// or split over 16: each process learns the buckets on its own.
func TestNoOversellTwoServers(t *testing.T) {
	t.Parallel()
	for _, buckets := range []int{1, 16} {
		t.Run("buckets "+strconv.Itoa(buckets), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := newShop(t, e)
			second := s.startServer(t)
			const units, buyers, tries = 60, 200, 2
			s.product(t, "hot-two", 300, map[string]any{"quantity": units, "per_user_limit": 1, "buckets": buckets})
			tokens := s.shoppers(t, buyers, "two")
			apis := []string{s.api, second.URL + "/api/v1"}
			tally := attack(t, buyers, func(b, a int) (int, outcome) {
				// Alternate servers: a buyer's two attempts hit both.
				via := &shop{server: s.server, api: apis[(b+a)%2], admin: s.admin, watch: s.watch}
				return 1, via.purchase(t, tokens[b], "hot-two", 1, "t"+strconv.Itoa(a))
			}, tries)
			verify(t, s, e["SHOP_DATABASE_URL"], "hot-two", units, tally, 1)
		})
	}
}
