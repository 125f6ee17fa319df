package e2e

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
)

// Fault drills on a 3-master cluster: a writer killed mid-drain, a master
// killed and restarted on its AOF mid-sale.

// partitionStreams are the order streams of a shop on a cluster, one per
// partition (keyspace: each tagged by its partition).
func partitionStreams(e env) []string {
	p := keyspace.NewPartitions(clusterPartitions, true)
	out := make([]string, p.Count())
	for k := range out {
		out[k] = e["SHOP_KEY_PREFIX"] + "orders:" + p.Tag(k)
	}
	return out
}

// heldOnCluster counts the entries consumer holds over every partition.
func heldOnCluster(t *testing.T, s *shop, consumer string) int {
	t.Helper()
	n := 0
	for _, stream := range partitionStreams(s.watch.env) {
		res, err := s.watch.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{
			Stream: stream, Group: "writers", Start: "-", End: "+", Count: 1000, Consumer: consumer,
		}).Result()
		if err != nil && !isNoGroup(err) {
			t.Fatal(err)
		}
		n += len(res)
	}
	return n
}

func isNoGroup(err error) bool {
	return err != nil && len(err.Error()) >= 7 && err.Error()[:7] == "NOGROUP"
}

// The writer drill on a cluster: 240 orders over 6 SKUs on every master
// wait in their partitions' streams; a writer writes two batches and
// stops itself right after its second COMMIT, before XACK (--fault
// stop-after-commit:2), and is killed there with SIGKILL: mid-drain, with
// a batch in PostgreSQL and still pending. It is restarted under its name
// (it reads its own pending entries again) beside a second writer; every
// order is persisted exactly once, nothing is dead-lettered, and the
// invariants hold for every SKU.
func TestClusterDrillWriterKilledMidDrain(t *testing.T) {
	t.Parallel()
	e, c := clusterEnv(t, 3)
	s := newShop(t, e, "--writer=false")
	const nSKUs, units, buyers, tries = 6, 40, 60, 4
	skus := spreadSKUs(t, c, "clw", nSKUs)
	for _, sku := range skus {
		s.product(t, sku, 100, map[string]any{"quantity": units, "per_user_limit": 0})
	}
	tokens := s.shoppers(t, buyers, "clw")
	tally := newSales(skus...)
	// Buyer b's try i buys SKU (b+i) mod 6: 40 tries each, the stock.
	var wg sync.WaitGroup
	start := make(chan struct{})
	for b := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range tries {
				sku := skus[(b+i)%nSKUs]
				tally.add(b, map[string]int{sku: 1}, s.purchase(t, tokens[b], sku, 1, "clw-"+strconv.Itoa(i)))
			}
		}()
	}
	close(start)
	wg.Wait()
	if bad := tally.bad(); len(bad) > 0 {
		t.Fatalf("unexpected answers: %v", bad[:min(len(bad), 10)])
	}

	w := s.writer(t, "clw-a", "--concurrency", "1", "--batch", "10", "--fault", "stop-after-commit:2")
	stopped(t, w)
	rows := 0
	for _, sku := range skus {
		rows += rowsOf(t, s, sku)
	}
	pending := heldOnCluster(t, s, "clw-a")
	if rows == 0 || rows >= nSKUs*units || pending == 0 {
		t.Fatalf("the writer stopped with %d of %d orders in PostgreSQL and %d pending: not mid-drain", rows, nSKUs*units, pending)
	}
	w.kill()
	t.Logf("writer killed (SIGKILL) with %d of %d orders written, %d of them still pending", rows, nSKUs*units, pending)
	s.writer(t, "clw-a", "--concurrency", "1")
	s.writer(t, "clw-b")
	for _, sku := range skus {
		verify(t, s, e["SHOP_DATABASE_URL"], sku, units, tally.bySKU[sku], 0)
	}
	for _, stream := range partitionStreams(e) {
		if n := s.watch.rdb.XLen(context.Background(), stream+":dead").Val(); n != 0 {
			t.Fatalf("%d entries dead-lettered in %s", n, stream)
		}
	}
}

// A master of the cluster is killed with SIGKILL mid-sale and restarted on
// its AOF (appendfsync always) 3 s later. 360 shoppers arrive spread over
// 4 s, each buying one unit of one of 6 SKUs on the three masters (30
// units each, limit 1). A purchase that meets the outage is answered 503,
// never 500, and the shopper retries with the same Idempotency-Key; after
// the restart the sale goes on and sells out. Afterwards every SKU sold
// exactly its stock, nobody got two units, every accepted order is
// persisted once, and the invariants hold for every SKU.
func TestClusterDrillMasterKilledMidSale(t *testing.T) {
	t.Parallel()
	e, c := clusterEnv(t, 3)
	s := newShop(t, e)
	const nSKUs, units, buyers = 6, 30, 360
	skus := spreadSKUs(t, c, "clm", nSKUs)
	for _, sku := range skus {
		s.product(t, sku, 100, map[string]any{"quantity": units, "per_user_limit": 1})
	}
	tokens := s.shoppers(t, buyers, "clm")

	var crashed atomic.Bool
	// recovered counts buyers answered 503 first and 202 on a retry: the
	// sale went on after the restart.
	var refused, errors500, beforeCrash, recovered atomic.Int64
	start := time.Now()
	back := make(chan struct{})
	go func() {
		defer close(back)
		time.Sleep(800 * time.Millisecond)
		crashed.Store(true)
		end := s.watch.fault(5 * time.Second)
		c.Kill(0)
		time.Sleep(3 * time.Second)
		if err := c.Restart(0); err != nil {
			t.Error(err)
		}
		end()
	}()
	tally := newSales(skus...)
	var wg sync.WaitGroup
	for b := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(rand.N(4 * time.Second))))
			sku, key := skus[b%nSKUs], "clm-"+strconv.Itoa(b)
			met503 := false
			for deadline := time.Now().Add(30 * time.Second); ; {
				o := s.purchase(t, tokens[b], sku, 1, key)
				switch {
				case o.status == http.StatusServiceUnavailable:
					refused.Add(1)
					met503 = true
					if time.Now().After(deadline) {
						t.Errorf("buyer %d: still 503 after 30 s", b)
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				case o.status >= 500:
					errors500.Add(1)
				case o.status == http.StatusAccepted && !crashed.Load():
					beforeCrash.Add(1)
				case o.status == http.StatusAccepted && met503:
					recovered.Add(1)
				}
				tally.add(b, map[string]int{sku: 1}, o)
				return
			}
		}()
	}
	wg.Wait()
	<-back
	if bad := tally.bad(); len(bad) > 0 || errors500.Load() > 0 {
		t.Fatalf("unexpected answers (%d 5xx other than 503): %v", errors500.Load(), bad[:min(len(bad), 10)])
	}
	if refused.Load() == 0 || beforeCrash.Load() == 0 || recovered.Load() == 0 {
		t.Fatalf("the crash did not fall mid-sale: %d accepted before it, %d answers 503, %d buyers accepted on a retry after a 503",
			beforeCrash.Load(), refused.Load(), recovered.Load())
	}
	t.Logf("%d purchases accepted before the crash, %d answers 503 during the outage, %d buyers accepted on a retry after a 503",
		beforeCrash.Load(), refused.Load(), recovered.Load())
	for _, sku := range skus {
		verify(t, s, e["SHOP_DATABASE_URL"], sku, units, tally.bySKU[sku], 1)
	}
}
