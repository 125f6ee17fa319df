package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// homedIn is the index of the first shopper whose home bucket is bucket.
func homedIn(t *testing.T, tokens []string, bucket, buckets int) int {
	t.Helper()
	for i, tok := range tokens {
		if inventory.HomeBucket(tokenSubject(t, tok), buckets) == bucket {
			return i
		}
	}
	t.Fatalf("no shopper homed in bucket %d of %d", bucket, buckets)
	return 0
}

// bucketSlots is the hash slot of each bucket of sku's round on the
// cluster: its partition's (inventory's BucketPartition).
func bucketSlots(sku string, buckets int) []int64 {
	p := keyspace.NewPartitions(clusterPartitions, true)
	out := make([]int64, buckets)
	for b := range out {
		part := (p.Of(sku) + b*clusterPartitions/buckets) % clusterPartitions
		out[b] = int64(keyspace.Slot(p.Tag(part)))
	}
	return out
}

// accounted checks that no order answered 202 is lost: the replica had
// every write, so the audit is clean as the failover left the buckets
// and `shop recover` finds none lost. Replication is asynchronous, so
// the replica may lack the last writes; then recover must report exactly
// the orders the drill finds in no store, and the audit be clean after
// it, and those orders leave the tally (reported, not silently dropped).
func (f *failoverSale) accounted(t *testing.T, e env) {
	t.Helper()
	lost := f.lost(t)
	if len(lost) == 0 {
		if out, stderr, err := runShop(t, e, "audit"); err != nil || !strings.Contains(out, `"ok": true`) {
			t.Fatalf("shop audit after the failover, nothing lost: %v\n%s\n%s", err, out, stderr)
		}
	}
	reported, out, err := f.recover(t)
	if len(reported) != len(lost) || strings.Join(reported, ",") != strings.Join(lost, ",") || (len(lost) == 0 && err != nil) {
		t.Fatalf("recover reported %d lost %v (err %v), the stores miss %d %v\n%s", len(reported), reported, err, len(lost), lost, out)
	}
	t.Logf("lost with the killed master's unreplicated writes: %d %v; %s", len(lost), lost, checkedLine(out))
	for _, sold := range f.tally.bySKU {
		for _, id := range lost {
			delete(sold.units, id)
		}
	}
	if out, stderr, err := runShop(t, e, "audit"); err != nil || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("shop audit after recover: %v\n%s\n%s", err, out, stderr)
	}
}

// A stock bucket's master killed mid-sale (docs/design/buckets.md,
// "Failover"): one SKU of 3 buckets, one on each master of a cluster with
// a replica each (AOF on), servers A and B, one `shop writer`, 60
// shoppers with no limit buying now through A and B at random moments
// over 3 s. 500 ms in, the master holding bucket 1 is killed with
// SIGKILL; its replica takes over (CLUSTER FAILOVER TAKEOVER) 3 s later
// while the shoppers go on, every placement met by the outage repeated
// with its key until it is answered otherwise, twice.
//
// During the outage a purchase by a shopper homed in bucket 1 is answered
// 503, never 202 or out_of_stock (the bucket's units cannot be sold, nor
// said to be gone); after the takeover the same key buys a unit. The
// sale asks for fewer units than the round has: no shopper is refused. Once the
// writer has drained, the lost set (ids answered 202 that neither
// PostgreSQL nor a stream names) is what `shop recover --accepted`
// reports: empty, and then the audit is clean before any recovery, when
// the replica had every write. The rest is sold out by buyers of every
// home bucket (moves carry bucket 1's units to them), the audit is clean,
// and each accepted order is in PostgreSQL once, every unit sold once
// (the invariant check I1–I7).
func TestClusterDrillBucketMasterKilled(t *testing.T) {
	t.Parallel()
	c := testenv.StartClusterWithReplicas(t, 3)
	e := clusterEnvOn(t, c)
	s := newShop(t, e, "--writer=false")
	b := s.startServer(t, "--writer=false")
	s.writer(t, "bfo-w")
	const sku, units, buckets, shoppers, rounds = "bfo", 150, 3, 60, 2
	const killedBucket = 1
	const outage = 3 * time.Second // from the kill to the takeover
	s.product(t, sku, 100, map[string]any{"quantity": units, "per_user_limit": 0, "buckets": buckets})
	tokens := s.shoppers(t, shoppers, "bfo")
	probe := homedIn(t, tokens, killedBucket, buckets)
	slots := bucketSlots(sku, buckets)
	owner := masters(t, c)
	killed := owner[int(slots[killedBucket])]
	if owner[int(slots[0])] == killed || owner[int(slots[2])] == killed || owner[int(slots[0])] == owner[int(slots[2])] {
		t.Fatalf("the buckets' slots %v are not on three masters", slots)
	}
	f := &failoverSale{s: s, apis: []string{s.api, b.URL + "/api/v1"}, skus: []string{sku}, tokens: tokens, tally: newSales(sku)}

	replica, err := c.ReplicaOf(slots[killedBucket])
	if err != nil {
		t.Fatal(err)
	}
	rrdb := client(t, replica.URL)
	// The drill, not the cluster, picks the moment of the takeover.
	if err := rrdb.ConfigSet(context.Background(), "cluster-replica-no-failover", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	probeKey := placement{token: tokens[probe], sku: sku, key: "probe"}
	end := s.watch.fault(2 * time.Second)
	f.buyNows(t, rounds, func() {
		killedAt := time.Now()
		c.Kill(killed)
		waitLinkDown(t, rrdb)
		// The bucket's units are out of reach: its shopper is told to retry.
		if o, answered := tryPlace(s, s.api, probeKey); answered && o.status != http.StatusServiceUnavailable {
			t.Errorf("a purchase from bucket %d while its master is down: %+v, want 503", killedBucket, o)
		}
		time.Sleep(time.Until(killedAt.Add(outage)))
		if err := c.TakeOver(slots[killedBucket]); err != nil {
			t.Error(err)
		}
		t.Logf("master %d (bucket %d) killed; its replica took over %s after", killed, killedBucket, time.Since(killedAt))
	})
	// The same key after the takeover: the bucket sells again.
	o := settleTwice(t, s, s.api, probeKey)
	if o.status != http.StatusAccepted {
		t.Fatalf("a purchase from bucket %d after the takeover: %+v, want 202", killedBucket, o)
	}
	f.tally.add(probe, map[string]int{sku: 1}, o)
	waitHoldsSettled(t, s)
	end()
	if bad := f.tally.bad(); len(bad) > 0 {
		t.Fatalf("unexpected answers: %v", bad[:min(len(bad), 10)])
	}
	// The sale asked for fewer units than the round had: bucket 1's units
	// out of reach never made a shopper hear they were gone.
	if refused := f.tally.bySKU[sku].refused; len(refused) > 0 {
		t.Fatalf("refusals with %d units asked of %d: %v", shoppers*rounds+1, units, refused)
	}
	if f.repeated.Load() == 0 {
		t.Fatalf("no placement met the %s without master %d: the kill did not fall mid-sale", outage, killed)
	}
	f.drained(t)
	f.accounted(t, e)

	f.soldOut(t, e)
	verify(t, s, e["SHOP_DATABASE_URL"], sku, units, f.tally.bySKU[sku], 0)
}
