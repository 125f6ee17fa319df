package e2e

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// The shop on a Redis Cluster: the same binary and the same API as on one
// Redis, with SHOP_REDIS_CLUSTER=true and the cluster's seeds in
// SHOP_REDIS_URL, on a private cluster of masters (testenv.StartCluster:
// AOF with appendfsync always). Each test ends with the invariant check
// per SKU, reading every key where a server on a cluster keeps it
// (loadtest.LayoutOf on a cluster client).

// clusterPartitions is SHOP_ORDER_PARTITIONS's default on a cluster
// (config.DefaultClusterPartitions), which the servers here run with.
const clusterPartitions = 12

// clusterEnv is the environment of a shop on a private cluster of masters
// masters, with a private database.
func clusterEnv(t *testing.T, masters int) (env, *testenv.RedisCluster) {
	t.Helper()
	c := testenv.StartCluster(t, masters)
	return clusterEnvOn(t, c), c
}

// clusterEnvOn is the environment of a shop on the private cluster c
// (with replicas or without), with a private database.
func clusterEnvOn(t *testing.T, c *testenv.RedisCluster) env {
	t.Helper()
	db := testenv.NewDatabase(t)
	return env{
		"SHOP_ADDR":          "127.0.0.1:0",
		"SHOP_REDIS_CLUSTER": "true",
		"SHOP_REDIS_URL":     c.URL,
		"SHOP_DATABASE_URL":  db.URL,
		"SHOP_KEY_PREFIX":    c.Prefix,
		"SHOP_JWT_SECRET":    "e2e-secret-0123456789abcdef0123456789abcdef",
		"SHOP_RATE_LIMIT":    "0",
		"SHOP_LOG_LEVEL":     "warn",
	}
}

// masters maps each hash slot to the index of the master holding it (the
// masters in c's order).
func masters(t *testing.T, c *testenv.RedisCluster) map[int]int {
	t.Helper()
	slots, err := testenv.ClusterSlots(context.Background(), c.Client)
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for i, m := range c.Masters {
		index[addrOf(t, m.URL)] = i
	}
	owner := map[int]int{}
	for _, s := range slots {
		i, ok := index[s.Nodes[0].Addr]
		if !ok {
			t.Fatalf("slots %d-%d held by %s, not one of the cluster's masters", s.Start, s.End, s.Nodes[0].Addr)
		}
		for slot := s.Start; slot <= s.End; slot++ {
			owner[slot] = i
		}
	}
	return owner
}

// skuMaster is the index of the master holding sku's live state on a
// cluster: its partition's slot (keyspace: the SKU's keys carry its
// partition's tag).
func skuMaster(owner map[int]int, sku string) int {
	p := keyspace.NewPartitions(clusterPartitions, true)
	return owner[keyspace.Slot(p.Tag(p.Of(sku)))]
}

// spreadSKUs names n SKUs base-0, base-1, ..., chosen so that they fall
// on the masters in turn (SKU i on master i mod masters): every master
// holds some of the sale.
func spreadSKUs(t *testing.T, c *testenv.RedisCluster, base string, n int) []string {
	t.Helper()
	owner := masters(t, c)
	var out []string
	for i := 0; len(out) < n; i++ {
		if i > 100*n {
			t.Fatalf("no SKUs %s-* on every master", base)
		}
		sku := base + "-" + strconv.Itoa(i)
		if skuMaster(owner, sku) == len(out)%len(c.Masters) {
			out = append(out, sku)
		}
	}
	return out
}

// via is s answering through another of its servers.
func (s *shop) via(api string) *shop {
	return &shop{server: s.server, api: api, admin: s.admin, watch: s.watch}
}

// checkout checks the shopper's cart out (its lines placed beforehand).
func (s *shop) checkout(t *testing.T, token, key string) outcome {
	var body struct {
		OrderID string `json:"order_id"`
		Code    string `json:"code"`
	}
	sent := time.Now()
	r := bulk(t, http.MethodPost, s.api+"/cart/checkout", nil, "Authorization", "Bearer "+token, "Idempotency-Key", key)
	r.JSON(t, &body)
	if r.Status >= 500 {
		s.watch.serverError(sent, r.Status, "checkout ("+body.Code+")")
	}
	return outcome{status: r.Status, code: body.Code, orderID: body.OrderID}
}

// sales is the tally of a sale over many SKUs, one sale per SKU as the
// check takes them: an order over several SKUs counts in each with the
// units of its line there.
type sales struct {
	mu    sync.Mutex
	bySKU map[string]*sale
}

func newSales(skus ...string) *sales {
	s := &sales{bySKU: map[string]*sale{}}
	for _, sku := range skus {
		s.bySKU[sku] = newSale()
	}
	return s
}

// add tallies one answer to an order of lines (SKU → units). A refusal
// counts once, with the first line's SKU; a 5xx counts as unknown in
// every line's SKU, since it may have bought any of them.
func (s *sales) add(buyer int, lines map[string]int, o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	skus := slices.Sorted(func(yield func(string) bool) {
		for sku := range lines {
			if !yield(sku) {
				return
			}
		}
	})
	for i, sku := range skus {
		if o.status == http.StatusAccepted || o.status >= 500 || i == 0 {
			s.bySKU[sku].add(buyer, lines[sku], o)
		}
	}
}

// bad is every unexpected answer of every SKU.
func (s *sales) bad() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for sku, t := range s.bySKU {
		for _, b := range t.bad {
			out = append(out, sku+": "+b)
		}
	}
	return out
}

// The flash-sale suite on a 3-master cluster: two `shop serve` and two
// `shop writer` processes; a sale of 12 SKUs spread over every master plus
// one hot SKU; 2,000 buyers released together, 3 tries each, alternating
// between the servers (at most 64 requests in flight): one buyer in ten
// first checks out a cart of two SKUs on two different masters, everyone
// else first tries the hot SKU (limit 1), half of them tries it again,
// then SKUs of the spread (limit 2).
// Everything sells out exactly, every accepted order is persisted once,
// and I1–I7 hold for every SKU, read from the masters that hold it.
// Then `shop loadtest --redis-cluster` runs a sale against the same
// servers and judges its invariants on the cluster itself.
func TestClusterFlashSale(t *testing.T) {
	t.Parallel()
	e, c := clusterEnv(t, 3)
	s := newShop(t, e, "--writer=false")
	second := s.startServer(t, "--writer=false")
	s.writer(t, "cluster-w1")
	s.writer(t, "cluster-w2")
	apis := []string{s.api, second.URL + "/api/v1"}

	const hotUnits, wideUnits, buyers, tries = 300, 100, 2000, 3
	hot := spreadSKUs(t, c, "cl-hot", 1)[0]
	wide := spreadSKUs(t, c, "cl-sku", 12)
	owner := masters(t, c)
	s.product(t, hot, 500, map[string]any{"quantity": hotUnits, "per_user_limit": 1})
	for _, sku := range wide {
		s.product(t, sku, 200, map[string]any{"quantity": wideUnits, "per_user_limit": 2})
	}
	tokens := s.shoppers(t, buyers, "cluster")

	// One buyer in ten has a cart over two SKUs on two masters.
	carts := map[int]map[string]int{}
	for b := 0; b < buyers; b += 10 {
		a := wide[(b/10)%len(wide)]
		other := wide[(b/10+1)%len(wide)]
		if skuMaster(owner, a) == skuMaster(owner, other) {
			t.Fatalf("cart of %s and %s on one master", a, other)
		}
		carts[b] = map[string]int{a: 1, other: 1}
		for sku, qty := range carts[b] {
			addToCart(t, apis[b%2], "Bearer "+tokens[b], sku, qty)
		}
	}

	tally := newSales(append([]string{hot}, wide...)...)
	var checkedOut atomic.Int64
	// The buyers are released together, at most maxInFlight requests at
	// a time: 6,000 at once only measure how this 2-core machine queues
	// (Redis replies past the servers' 2 s timeouts, answered 503).
	const maxInFlight = 64
	inFlight := make(chan struct{}, maxInFlight)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for b := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for try := range tries {
				inFlight <- struct{}{}
				via := s.via(apis[(b+try)%2])
				key := "cl-" + strconv.Itoa(try)
				var sku string
				switch {
				case try == 0 && carts[b] != nil:
					o := via.checkout(t, tokens[b], key)
					if o.status == http.StatusAccepted {
						checkedOut.Add(1)
					}
					tally.add(b, carts[b], o)
					<-inFlight
					continue
				case try == 0 || (try == 1 && b%2 == 0):
					sku = hot
				case try == 1:
					sku = wide[(b/2)%len(wide)]
				default:
					sku = wide[(b+5)%len(wide)]
				}
				tally.add(b, map[string]int{sku: 1}, via.purchase(t, tokens[b], sku, 1, key))
				<-inFlight
			}
		}()
	}
	close(start)
	wg.Wait()
	if bad := tally.bad(); len(bad) > 0 {
		t.Fatalf("unexpected answers: %v", bad[:min(len(bad), 10)])
	}
	t.Logf("%d buyers × %d tries over 2 servers; %d of %d checkouts over two masters accepted; 5xx: %v",
		buyers, tries, checkedOut.Load(), len(carts), s.watch.errorsByWhat())
	verify(t, s, e["SHOP_DATABASE_URL"], hot, hotUnits, tally.bySKU[hot], 1)
	for _, sku := range wide {
		verify(t, s, e["SHOP_DATABASE_URL"], sku, wideUnits, tally.bySKU[sku], 2)
	}
	// The product's own audit agrees, the checkouts' lines held outside
	// their orders' homes accounted from their own partitions.
	if out, stderr, err := runShop(t, e, "audit"); err != nil || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("shop audit after the sale: %v\n%s\n%s", err, out, stderr)
	}

	// shop loadtest against the cluster-backed servers, its checks read
	// on the cluster.
	addAdmin(t, e)
	r, stderr, err := runLoadtest(t, e, second, "--redis-cluster", "--users", "20", "--units", "50", "--per-user-limit", "2")
	if err != nil || !r.OK || r.Attack.Accepted != 40 {
		t.Fatalf("shop loadtest on the cluster: %v, ok %v, accepted %d\n%+v\n%s", err, r.OK, r.Attack.Accepted, r.Invariants, stderr)
	}
	for _, inv := range r.Invariants {
		if !inv.OK {
			t.Errorf("shop loadtest on the cluster: %s: %s", inv.Name, inv.Detail)
		}
	}
	t.Logf("shop loadtest on the cluster: %d accepted, SKU %s on master %d", r.Attack.Accepted, r.SKU, skuMaster(owner, r.SKU))
}

// TestClusterLoadtestPayRatio: `shop loadtest --redis-cluster --pay-ratio
// 0.5` against a server on a 3-master cluster with a 5 s payment window:
// half the winners pay, the other orders expire and the sweep gives their
// units back once each, and I1–I7 hold on the cluster's keys (paid orders
// kept, released once, statuses agreeing with PostgreSQL).
func TestClusterLoadtestPayRatio(t *testing.T) {
	t.Parallel()
	e, _ := clusterEnv(t, 3)
	payRatioLoadtest(t, e, "--redis-cluster")
}
