package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
)

// A partition's snapshot script reads a bounded part of what accounts for
// its foreign lines however large the settled log and the holds are: of
// the log only the entries scored in its own ms or later (the rest is
// read after it, in pages), of the holds at most its cap, and it says
// when the cap cut them.
func TestSnapshotScriptReadsABoundedPartOfTheSettledLog(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	k := func(s string) string { return r.Prefix + s }
	stream, sale, buyers, holds, log, releases := k("stream"), k("sale"), k("buyers"), k("holds"), k("settled"), k("releases")
	r.Client.HSet(ctx, sale, "round", 1, "quantity", 10, "available", 10)
	now, err := r.Client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	const old, holdCount, max = 5000, 5, 3
	var zs []redis.Z
	for i := range old { // settled before the snapshot, one every ms
		zs = append(zs, redis.Z{Score: float64(now.UnixMilli() - 60000 + int64(i)), Member: fmt.Sprintf(`{"order_id":"old-%d"}`, i)})
	}
	future := now.UnixMilli() + 3600000 // scored after the snapshot's ms: read by it
	zs = append(zs, redis.Z{Score: float64(future), Member: `{"order_id":"new-1"}`}, redis.Z{Score: float64(future), Member: `{"order_id":"new-2"}`})
	r.Client.ZAdd(ctx, log, zs...)
	for i := range holdCount {
		id := fmt.Sprintf("h-%d", i)
		r.Client.ZAdd(ctx, holds, redis.Z{Score: float64(i), Member: id})
		r.Client.HSet(ctx, k("hold:")+id, "user", "u", "items", "[]")
	}
	run := func(max int) rawSnap {
		t.Helper()
		out, err := snapshotScript.Run(ctx, r.Client, []string{stream, sale, buyers, holds, log, releases},
			"writers", max, 1, 1, k("hold:")).Text()
		if err != nil {
			t.Fatal(err)
		}
		var raw rawSnap
		if err := json.Unmarshal([]byte(out), &raw); err != nil {
			t.Fatal(err)
		}
		return raw
	}
	raw := run(max)
	if len(raw.Settled) != 2 || raw.SettledTruncated {
		t.Errorf("settled: %d entries read in the script (truncated %v), want the 2 scored after its ms", len(raw.Settled), raw.SettledTruncated)
	}
	if len(raw.Holds) != max || !raw.HoldsTruncated {
		t.Errorf("holds: %d read (truncated %v), want %d and truncated", len(raw.Holds), raw.HoldsTruncated, max)
	}
	if raw.Now < now.UnixMilli() || raw.Now >= future {
		t.Errorf("now %d, want the server's ms (%d or later)", raw.Now, now.UnixMilli())
	}
	if raw = run(1); !raw.SettledTruncated || len(raw.Settled) != 1 {
		t.Errorf("settled with a cap of 1: %d read, truncated %v; want 1 and truncated", len(raw.Settled), raw.SettledTruncated)
	}
}

// sumBuckets adds a bucketed round's buckets up, and refuses a snapshot
// whose buckets do not agree with the count read before it (a reseeding
// in between) rather than audit a part of the round.
func TestSumBuckets(t *testing.T) {
	hash := func(kv ...any) any { return kv }
	b0 := hash("round", "7", "quantity", "9", "available", "2", "released", "1", "buckets", "2")
	b1 := hash("round", "7", "available", "3", "buckets", "2")
	got, _, err := sumBuckets(list[[2]any]{{b0, hash("u1", "2")}, {b1, hash("u2", "1")}}, []saleRef{{sku: "a", buckets: 2}})
	if err != nil || len(got) != 1 {
		t.Fatalf("sum: %v %v", got, err)
	}
	l, _ := liveRound("a", got[0])
	if l.avail != 5 || l.given != 1 || l.buyers["u1"] != 2 || l.buyers["u2"] != 1 {
		t.Fatalf("summed round %+v", l)
	}
	for name, c := range map[string]struct {
		raw list[[2]any]
		n   int
	}{
		"another_round": {list[[2]any]{{b0, hash()}, {hash("round", "8", "available", "3"), hash()}}, 2},
		"more_buckets":  {list[[2]any]{{b0, hash()}}, 1},
		"fewer_read":    {list[[2]any]{{b0, hash()}}, 2},
	} {
		if _, _, err := sumBuckets(c.raw, []saleRef{{sku: "a", buckets: c.n}}); err == nil {
			t.Errorf("%s: summed", name)
		}
	}
}

// On a cluster each bucket is read in its own partition's snapshot, one
// after another: buckets of two rounds, or a round missing a bucket, are
// a reseeding between them, and the snapshot is refused.
func TestOneRoundEach(t *testing.T) {
	bucket := func(round int64, b int) live { return live{sku: "a", round: round, bucket: b, of: 2} }
	if err := oneRoundEach([]live{bucket(7, 0), bucket(7, 1), {sku: "b", round: 3}}); err != nil {
		t.Fatalf("one round: %v", err)
	}
	for name, lives := range map[string][]live{
		"two_rounds":     {bucket(7, 0), bucket(8, 1)},
		"missing_bucket": {bucket(7, 0)},
	} {
		if err := oneRoundEach(lives); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
