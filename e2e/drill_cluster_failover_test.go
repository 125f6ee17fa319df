package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/testenv"
)

// Failover on a cluster with one replica per master (docs/operations.md,
// "Failover"): a planned CLUSTER FAILOVER loses nothing; a master killed
// with SIGKILL and replaced by its replica (CLUSTER FAILOVER TAKEOVER)
// loses what it had not replicated, and `shop recover` names exactly
// those orders and rebuilds the stock so that the sale sells exactly what
// no known order holds.

// The drill: 3 masters and 3 replicas (AOF on), servers A and B (no
// writer), one `shop writer`, 6 SKUs, two on each master (limit 0), 90
// shoppers; a live-stock stream on B of a SKU of master 1 (the planned
// failover's).
//
//  1. Shoppers check out carts over two masters and buy now, through A
//     and B, spread over 3 s; CLUSTER FAILOVER of master 1's replica runs
//     mid-sale. Every placement is answered 202 or 409, or 503 during the
//     switch (repeated with its key until it is not, twice: the same
//     answer), never another 5xx. Once written, the audit is clean, no
//     202 is missing from PostgreSQL and the streams (the drill's own
//     reading) and `shop recover` reports none lost. The stream gets a
//     purchase made after the failover.
//  2. Master 2's replica is caught up, then held (CLIENT PAUSE WRITE: it
//     reads its master's stream but applies nothing). A burst of
//     buy-nows on master 2's SKUs is written to PostgreSQL; the writer is
//     stopped (SIGTERM) and a second burst is accepted, in master 2's
//     streams only. Master 2 is killed with SIGKILL and left down, its
//     replica, unpaused once it saw its master go (dropping what it had
//     not applied), takes over (CLUSTER FAILOVER TAKEOVER) 3 s later
//     while the shoppers go on (the placements that met the outage are
//     answered 503 and repeated), and another writer starts.
//
// After the sale the drill computes the lost set itself (the ids answered
// 202 that neither PostgreSQL nor any stream or dead letter names): it is
// the second burst, exactly, and `shop recover --accepted` reports exactly
// it, and restores the first burst's statuses. Then the rest is sold out,
// the audit is clean and the drill ends with the full invariant check of
// every SKU, the lost orders taken out of the accepted ones (reported, so
// not silently dropped).
//
// Each SKU has 120 units, more than the sale takes before recover: the
// promoted replica does not know the first burst's units are sold, and a
// SKU it sold out before recover would be sold past its stock in Redis
// (the writer's CHECK refuses the excess, dead-lettered, and recover
// then refuses to rebuild a round its known orders overfill).
func TestClusterDrillFailoverMidSale(t *testing.T) {
	t.Parallel()
	c := testenv.StartClusterWithReplicas(t, 3)
	e := clusterEnvOn(t, c)
	e["SHOP_SAGA_HOLD_TTL"] = holdsTTL
	s := newShop(t, e, "--writer=false") // A, first: its sweeper holds the lock
	b := s.startServer(t, "--writer=false")
	w := s.writer(t, "cfo-w")
	const nSKUs, units, shoppers = 6, 120, 90
	const planned, crashed = 1, 2  // the masters failed over
	const outage = 3 * time.Second // from the kill to the takeover
	skus := spreadSKUs(t, c, "cfo", nSKUs)
	for _, sku := range skus {
		s.product(t, sku, 100, map[string]any{"quantity": units, "per_user_limit": 0})
	}
	tokens := s.shoppers(t, shoppers, "cfo")
	f := &failoverSale{s: s, apis: []string{s.api, b.URL + "/api/v1"}, skus: skus, tokens: tokens, tally: newSales(skus...)}

	watched := skus[planned] // SKU i is on master i mod 3
	live := stream(t, b.URL, watched)
	if _, ok := live.Next(10 * time.Second); !ok {
		t.Fatal("no first event on the live stock stream")
	}

	// 1. The planned failover, mid-sale.
	end := s.watch.fault(2 * time.Second)
	f.sale(t, "p1", f.carts(t), func() {
		if err := c.Failover(skuSlot(watched)); err != nil {
			t.Error(err)
		}
	})
	end()
	f.drained(t)
	if out, stderr, err := runShop(t, e, "audit"); err != nil || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("shop audit after the planned failover: %v\n%s\n%s", err, out, stderr)
	}
	if lost := f.lost(t); len(lost) != 0 {
		t.Fatalf("the planned failover lost orders answered 202: %v", lost)
	}
	if reported, out, err := f.recover(t); err != nil || len(reported) != 0 || !strings.Contains(out, " 0 lost") {
		t.Fatalf("recover after the planned failover reported lost %v (%v):\n%s", reported, err, out)
	}
	f.streamed(t, live, watched)

	// 2. The crash: a burst written, a burst in master 2's streams only.
	slot := skuSlot(skus[crashed])
	replica, err := c.ReplicaOf(slot)
	if err != nil {
		t.Fatal(err)
	}
	rrdb := client(t, replica.URL)
	carts := f.carts(t) // before the crash: the carts are on every master
	// The replica promotes itself only when told (TAKEOVER), not after
	// cluster-node-timeout: the drill, not the cluster, picks the moment.
	if err := rrdb.ConfigSet(context.Background(), "cluster-replica-no-failover", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, client(t, c.Masters[crashed].URL), rrdb)
	if err := rrdb.Do(context.Background(), "CLIENT", "PAUSE", 30000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	onCrashed := []string{skus[crashed], skus[crashed+3]}
	written := f.burst(t, "b1", onCrashed, 10)
	f.drained(t) // in PostgreSQL; the confirmations never reach the replica
	// Stopped, not paused: a paused writer's blocked read is still served,
	// and it would persist what it got once continued.
	w.stop(t)
	lost := f.burst(t, "b2", onCrashed, 8)
	end = s.watch.fault(2 * time.Second)
	c.Kill(crashed)
	f.sale(t, "p2", carts, func() {
		killed := time.Now()
		waitLinkDown(t, rrdb)
		if err := rrdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
			t.Error(err)
		}
		down := time.Since(killed)
		// The replica takes over only once the dead master's commands
		// have met the servers' 2 s timeouts: the switch is answered 503.
		time.Sleep(outage)
		if err := c.TakeOver(slot); err != nil {
			t.Error(err)
		}
		s.writer(t, "cfo-w2")
		t.Logf("master %d killed: its replica saw it go in %s and had taken over %s after the kill", crashed, down, time.Since(killed))
	})
	waitHoldsSettled(t, s)
	end()
	if bad := f.tally.bad(); len(bad) > 0 {
		t.Fatalf("unexpected answers: %v", bad[:min(len(bad), 10)])
	}
	if f.repeated.Load() == 0 {
		t.Fatalf("no placement met the %s without master %d: the crash did not fall mid-sale", outage, crashed)
	}

	// The lost set, by the drill's own reading, then by recover's.
	want := f.lost(t)
	if !slices.Equal(want, lost) {
		t.Fatalf("lost %d orders answered 202 %v, want the second burst's %d %v", len(want), want, len(lost), lost)
	}
	reported, out, err := f.recover(t)
	if err == nil || !slices.Equal(reported, want) {
		t.Fatalf("recover reported %d lost %v (err %v), want %d %v\n%s", len(reported), reported, err, len(want), want, out)
	}
	// The first burst's confirmations never reached the replica either.
	if restored := fmt.Sprintf("%d confirmed orders had lost their status in Redis: restored", len(written)); !strings.Contains(out, restored) {
		t.Fatalf("recover did not say %q:\n%s", restored, out)
	}
	t.Logf("recover reported the %d lost orders, as computed: %s", len(reported), checkedLine(out))

	for _, sold := range f.tally.bySKU {
		for _, id := range reported {
			delete(sold.units, id)
		}
	}
	f.soldOut(t, e)
	for _, sku := range skus {
		verify(t, s, e["SHOP_DATABASE_URL"], sku, units, f.tally.bySKU[sku], 0)
	}
}

// soldOut sells the rest of every SKU, buyer after buyer, waits for the
// writer and checks that the audit is clean.
func (f *failoverSale) soldOut(t *testing.T, e env) {
	t.Helper()
	buyers := make([]int, len(f.tokens))
	for i := range buyers {
		buyers[i] = i
	}
	sellOut(t, f.s, f.tokens, buyers, f.tally)
	f.drained(t)
	if out, stderr, err := runShop(t, e, "audit"); err != nil || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("shop audit after the sell-out: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("placements: %d answered 503 or unanswered and repeated with their keys; 5xx %v", f.repeated.Load(), f.s.watch.errorsByWhat())
}

// failoverSale is the drill's shoppers, servers and tally.
type failoverSale struct {
	s        *shop
	apis     []string // A's and B's
	skus     []string
	tokens   []string
	tally    *sales
	repeated atomic.Int64
}

// skuSlot is the hash slot of sku's live state (its partition's).
func skuSlot(sku string) int64 {
	p := keyspace.NewPartitions(clusterPartitions, true)
	return int64(keyspace.Slot(p.Tag(p.Of(sku))))
}

// carts fills each shopper's cart with two SKUs on two masters (SKU i is
// on master i mod 3), through A.
func (f *failoverSale) carts(t *testing.T) []map[string]int {
	t.Helper()
	out := make([]map[string]int, len(f.tokens))
	for b := range f.tokens {
		out[b] = map[string]int{f.skus[b%len(f.skus)]: 1, f.skus[(b+1)%len(f.skus)]: 1}
		for sku, q := range out[b] {
			r := bulk(t, http.MethodPut, f.s.api+"/cart/items/"+sku, map[string]any{"quantity": q}, "Authorization", "Bearer "+f.tokens[b])
			if r.Status != http.StatusOK {
				t.Fatalf("cart of buyer %d, %s: %d %s", b, sku, r.Status, r.Body)
			}
		}
	}
	return out
}

// sale runs a phase: every shopper, at a random moment within 3 s, checks
// out its cart and buys another SKU now, each through A or B; fault runs
// 500 ms in, while they shop.
func (f *failoverSale) sale(t *testing.T, phase string, carts []map[string]int, fault func()) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for b := range f.tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(rand.N(3 * time.Second))))
			f.place(t, b, b%2, placement{token: f.tokens[b], key: phase + "-checkout"}, carts[b])
			sku := f.skus[(b+2)%len(f.skus)] // not in its cart; on every master in turn
			f.place(t, b, (b+1)%2, placement{token: f.tokens[b], sku: sku, key: phase + "-now"}, map[string]int{sku: 1})
		}()
	}
	time.Sleep(500 * time.Millisecond)
	fault()
	wg.Wait()
}

// buyNows runs the sale: every shopper buys one unit of the drill's SKU
// now, rounds times, each at a random moment within 3 s, through A or B;
// fault runs 500 ms in, while they shop.
func (f *failoverSale) buyNows(t *testing.T, rounds int, fault func()) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for b := range f.tokens {
		for r := range rounds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Until(start.Add(rand.N(3 * time.Second))))
				p := placement{token: f.tokens[b], sku: f.skus[0], key: "now-" + strconv.Itoa(r)}
				f.place(t, b, (b+r)%2, p, map[string]int{f.skus[0]: 1})
			}()
		}
	}
	time.Sleep(500 * time.Millisecond)
	fault()
	wg.Wait()
}

// place sends p through server via (0 A, 1 B); an answer 503, or none, is
// repeated with its key through A until it is answered otherwise, twice
// (settleTwice: the same answer). Any other 5xx fails t.
func (f *failoverSale) place(t *testing.T, b, via int, p placement, lines map[string]int) {
	o, answered := tryPlace(f.s, f.apis[via], p)
	if !answered || o.status == http.StatusServiceUnavailable {
		f.repeated.Add(1)
		o = settleTwice(t, f.s, f.s.api, p)
	}
	if o.status >= 500 {
		t.Errorf("buyer %d, %q (key %s): %d %s", b, p.sku, p.key, o.status, o.code)
	}
	f.tally.add(b, lines, o)
}

// burst is n buy-nows, one per shopper, spread over skus, all answered
// 202; their order ids, sorted.
func (f *failoverSale) burst(t *testing.T, name string, skus []string, n int) []string {
	t.Helper()
	var ids []string
	for b := range n {
		sku := skus[b%len(skus)]
		o, answered := tryPlace(f.s, f.apis[b%2], placement{token: f.tokens[b], sku: sku, key: name})
		if !answered || o.status != http.StatusAccepted {
			t.Fatalf("burst %s, buyer %d, %s: %+v (answered %v)", name, b, sku, o, answered)
		}
		f.tally.add(b, map[string]int{sku: 1}, o)
		ids = append(ids, o.orderID)
	}
	slices.Sort(ids)
	return ids
}

// drained waits until the writer has persisted every unit sold.
func (f *failoverSale) drained(t *testing.T) {
	t.Helper()
	for _, sku := range f.skus {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			rep := f.s.stock(t, sku)
			if rep.Confirmed == rep.Sold {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d sold, %d confirmed after 30 s", sku, rep.Sold, rep.Confirmed)
			}
		}
	}
}

// accepted is every order id answered 202, sorted.
func (f *failoverSale) accepted() []string {
	f.tally.mu.Lock()
	defer f.tally.mu.Unlock()
	seen := map[string]bool{}
	for _, sold := range f.tally.bySKU {
		sold.mu.Lock()
		for id := range sold.units {
			seen[id] = true
		}
		sold.mu.Unlock()
	}
	return slices.Sorted(func(yield func(string) bool) {
		for id := range seen {
			if !yield(id) {
				return
			}
		}
	})
}

// lost is the accepted ids that no partition's stream or dead letters
// name and PostgreSQL does not hold (the streams read first: an entry
// the writer persists and trims meanwhile is in PostgreSQL then).
func (f *failoverSale) lost(t *testing.T) []string {
	t.Helper()
	known := namedInStreams(t, f.s)
	rows, err := openPool(t, f.s.watch.env).Query(context.Background(), `SELECT id::text FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		known[id] = true
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	var out []string
	for _, id := range f.accepted() {
		if !known[id] {
			out = append(out, id)
		}
	}
	return out
}

// namedInStreams is every order id an event of a partition's stream or
// dead letters (their fields as event_<name>) names.
func namedInStreams(t *testing.T, s *shop) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, stream := range partitionStreams(s.watch.env) {
		for key, pre := range map[string]string{stream: "", stream + ":dead": "event_"} {
			msgs, err := s.watch.rdb.XRange(context.Background(), key, "-", "+").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("XRANGE %s: %v", key, err)
			}
			for _, m := range msgs {
				v := redis.XMessage{ID: m.ID, Values: map[string]any{}}
				for k, x := range m.Values {
					if name, ok := strings.CutPrefix(k, pre); ok {
						v.Values[name] = x
					}
				}
				if e, _ := writer.ParseEntry(v); e.OrderID != "" {
					out[e.OrderID] = true
				}
			}
		}
	}
	return out
}

// recover runs `shop recover --accepted` with every id answered 202 and
// returns the ids it reports lost, sorted, its output and its error.
func (f *failoverSale) recover(t *testing.T) (lost []string, out string, err error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "accepted")
	if err := os.WriteFile(path, []byte(strings.Join(f.accepted(), "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runShop(t, f.s.watch.env, "recover", "--accepted", path)
	return lostLines(out), out + stderr, err
}

// checkedLine is recover's line counting the accepted orders checked.
func checkedLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "accepted orders checked") {
			return line
		}
	}
	return ""
}

// streamed buys one unit of sku (watched on live) and waits, with a
// generous bound, until live shows the stock below what it was.
func (f *failoverSale) streamed(t *testing.T, live *openapitest.Stream, sku string) {
	t.Helper()
	before := f.s.stock(t, sku).Available
	o, answered := tryPlace(f.s, f.s.api, placement{token: f.tokens[0], sku: sku, key: "watched"})
	if !answered || o.status != http.StatusAccepted {
		t.Fatalf("purchase of the watched %s: %+v (answered %v)", sku, o, answered)
	}
	f.tally.add(0, map[string]int{sku: 1}, o)
	if _, ok := live.Until(30*time.Second, func(e openapitest.StockEvent) bool { return e.Available < before }); !ok {
		t.Fatalf("the live stock stream of %s did not show the purchase made after the failover (below %d)", sku, before)
	}
}

// waitLinkDown waits until the replica sees its master gone.
func waitLinkDown(t *testing.T, replica *redis.Client) {
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, _ := replica.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:down") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the replica still sees its master 20 s after the kill:\n%s", info)
			return
		}
	}
}
