package e2e

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/loadtest"
	"github.com/shop-oss/shop/internal/testenv"
)

// Drill 2: one shopper fires 50 purchases at once, split over two `shop
// serve` processes, for a sale with a limit of one; half the purchases
// carry one Idempotency-Key, half a key of their own. Exactly one order
// comes of it, and every answer either names that order (202) or says
// limit_exceeded.
func TestDrillOneShopperFiftyPurchases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e)
	second := s.startServer(t)
	s.product(t, "drill-one", 100, map[string]any{"quantity": 10, "per_user_limit": 1})
	token := s.shoppers(t, 1, "one")[0]
	apis := []string{s.api, second.URL + "/api/v1"}
	var mu sync.Mutex
	ids, codes := map[string]int{}, map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "one-shared"
			if i%2 == 1 {
				key = "one-" + strconv.Itoa(i)
			}
			via := &shop{server: s.server, api: apis[i%2], admin: s.admin, watch: s.watch}
			<-start
			o := via.purchase(t, token, "drill-one", 1, key)
			mu.Lock()
			defer mu.Unlock()
			if o.status == http.StatusAccepted {
				ids[o.orderID]++
			} else {
				codes[strconv.Itoa(o.status)+" "+o.code]++
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(ids) != 1 || len(codes) > 1 || (len(codes) == 1 && codes["409 limit_exceeded"] == 0) {
		t.Fatalf("answers named orders %v and said %v; want one order, the rest limit_exceeded", ids, codes)
	}
	tally := newSale()
	for id := range ids {
		tally.add(0, 1, outcome{status: http.StatusAccepted, orderID: id})
	}
	t.Logf("one order, answered %v times; %v", ids, codes)
	s.waitConfirmed(t, "drill-one", 1)
	s.check(t, "drill-one", 10, 1, tally)
}

// stuckWriter runs a `shop writer` whose PostgreSQL swallows everything it
// sends (toxiproxy "timeout" with no end): it reads a batch from the
// stream and then hangs on its first statement, holding the entries
// without a transaction open. Call free to give it its network back.
func stuckWriter(t *testing.T, s *shop, consumer string, args ...string) (w *metricWriter, free func()) {
	t.Helper()
	we, p := pgViaProxy(t, s.watch.env)
	w = s.writerVia(t, we, consumer, append([]string{"--concurrency", "1"}, args...)...)
	p.Add(t, testenv.Toxic{Name: "swallow", Type: "timeout", Stream: "upstream", Attributes: map[string]any{"timeout": 0}})
	return w, func() {
		p.Remove(t, "swallow")
		p.Cut(t) // what was swallowed is lost: reset those connections
	}
}

// Drill 7: of two writers one is stopped (SIGSTOP) while it holds a batch
// and never resumes. The survivor, with --claim-idle 1s, takes the batch
// over (XAUTOCLAIM) within claim-idle + 10 s; only once the stopped
// consumer has nothing pending does the survivor remove it from the group.
func TestDrillSurvivorClaimsStoppedWriter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	a, _ := stuckWriter(t, s, "stopped-a", "--claim-idle", "1h")
	const units, buyers = 40, 20
	s.product(t, "drill-stop", 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, "stop")
	tally := attack(t, buyers, func(b, i int) (int, outcome) {
		return 1, s.purchase(t, tokens[b], "drill-stop", 1, "s"+strconv.Itoa(i))
	}, units/buyers)
	waitPendingFor(t, s, "stopped-a")
	a.pause()
	a.killed.Store(true) // stopped on purpose, for good
	claimStart := time.Now()
	s.writer(t, "survivor-b", "--claim-idle", "1s", "--concurrency", "1", "--forget-idle", "2s")
	ctx := context.Background()
	stream := e["SHOP_KEY_PREFIX"] + "orders"
	for {
		n, err := s.watch.rdb.XPending(ctx, stream, "writers").Result()
		if err == nil && n.Count == 0 {
			break
		}
		if time.Since(claimStart) > 11*time.Second {
			t.Fatalf("entries still pending %s after the survivor started (claim-idle 1 s): %+v", time.Since(claimStart), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the survivor claimed and wrote the stopped writer's batch within %s", time.Since(claimStart).Round(time.Millisecond))
	// The survivor's housekeeping removes the dead consumer (--forget-idle
	// 2s), only now that it holds nothing.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		consumers, err := s.watch.rdb.XInfoConsumers(ctx, stream, "writers").Result()
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]int64{}
		for _, c := range consumers {
			names[c.Name] = c.Pending
		}
		if _, ok := names["stopped-a"]; !ok {
			if _, ok := names["survivor-b"]; !ok {
				t.Fatalf("the survivor removed itself: %v", names)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stopped-a still in the group 30 s after its entries were claimed: %v", names)
		}
	}
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-stop", units, tally, 0)
}

// Drill 10: a writer is stopped (SIGSTOP) holding a batch while another
// writes the orders that follow and trims the stream (its housekeeping,
// every 2 s), leaving the stopped one's entries alone (--claim-idle 1h).
// The trim removes the written entries older than the stopped writer's
// but never goes below its oldest pending entry: XRANGE finds every
// pending id still in the stream. Then the stopped writer resumes
// (SIGCONT) and writes its batch; nothing was lost.
func TestDrillTrimKeepsPendingEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newShop(t, e, "--writer=false")
	const units, buyers = 600, 30
	s.product(t, "drill-trim", 100, map[string]any{"quantity": units, "per_user_limit": 0})
	tokens := s.shoppers(t, buyers, "trim")
	round := func(name string, n int) *sale {
		return attack(t, buyers, func(b, i int) (int, outcome) {
			return 1, s.purchase(t, tokens[b], "drill-trim", 1, name+strconv.Itoa(i))
		}, n)
	}
	// Orders written and acknowledged before the stop: what a trim may cut.
	early := s.writer(t, "early", "--claim-idle", "1h", "--concurrency", "1")
	tally := round("early", 3)
	s.waitConfirmed(t, "drill-trim", 3*buyers)
	early.stop(t)
	a, free := stuckWriter(t, s, "paused-a", "--claim-idle", "1h")
	tally.merge(round("held", 1))
	waitPendingFor(t, s, "paused-a")
	a.pause()
	s.writer(t, "trimmer-b", "--claim-idle", "1h", "--concurrency", "1")
	tally.merge(round("rest", units/buyers-4))

	ctx := context.Background()
	stream := e["SHOP_KEY_PREFIX"] + "orders"
	db := openPool(t, e)
	var st *loadtest.Store
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if st, err = loadtest.ReadStore(ctx, s.watch.rdb, db, e["SHOP_KEY_PREFIX"], "drill-trim"); err != nil {
			t.Fatal(err)
		}
		n, _ := s.watch.rdb.XLen(ctx, stream).Result()
		if int(n) < units && len(st.Rows)+len(st.Pending) == units {
			t.Logf("stream trimmed to %d entries of %d; %d pending for the stopped writer", n, units, len(st.Pending))
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the stream was not trimmed as expected (%d entries, %d rows, %d pending, %d pending ids gone)",
				n, len(st.Rows), len(st.Pending), len(st.Missing))
			break
		}
	}
	if len(st.Pending) == 0 || len(st.Missing) > 0 {
		t.Fatalf("%d pending, trimmed away unwritten: %v", len(st.Pending), st.Missing)
	}
	for _, id := range st.Pending {
		if msgs, err := s.watch.rdb.XRange(ctx, stream, id, id).Result(); err != nil || len(msgs) != 1 {
			t.Fatalf("XRANGE %s: %v %v", id, msgs, err)
		}
	}
	free()
	a.resume()
	verify(t, s, e["SHOP_DATABASE_URL"], "drill-trim", units, tally, 0)
}
