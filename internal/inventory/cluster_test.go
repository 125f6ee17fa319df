package inventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// On a Redis Cluster a SKU's live keys share the slot of its order
// partition's tag, so every stock script (seed, price, release with a
// guard and an outbox on the partition's stream, close) runs there; the
// slots are Redis's (CLUSTER KEYSLOT), not only this package's arithmetic.
func TestStockScriptsRunOnACluster(t *testing.T) {
	t.Parallel()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	parts := keyspace.NewPartitions(6, true)
	s := NewPartitionedStock(rdb, c.Prefix, parts)
	for i := range 12 {
		sku := fmt.Sprintf("sku-%d", i)
		tag := parts.Tag(parts.Of(sku))
		want := c.Slot(t, tag)
		// The keys of every script below, as the calls build them.
		for _, key := range []string{s.SaleKey(sku), s.BuyersKey(sku), s.releasedKey(sku), s.ChangesChannel(sku),
			s.SaleKey(sku) + ":noguard", s.SaleKey(sku) + ":nooutbox", c.Prefix + "orders:" + tag} {
			if got := c.Slot(t, key); got != want {
				t.Fatalf("%s: slot %d, want %d (the partition tag %s)", key, got, want, tag)
			}
		}
		if err := s.OpenRound(ctx, sku, LiveRound{Round: 1, Quantity: 5, PerUserLimit: 2, PriceCents: 100}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetPrice(ctx, sku, 200); err != nil {
			t.Fatal(err)
		}
		rdb.HIncrBy(ctx, s.SaleKey(sku), "available", -2)
		rdb.HIncrBy(ctx, s.BuyersKey(sku), "u1", 2)
		guard := s.SaleKey(sku) + ":order-o1" // a caller's hash tagged like the SKU
		rdb.HSet(ctx, guard, "status", "pending")
		r, err := s.Release(ctx, Release{OrderID: "o1", UserID: "u1", Lines: []ReleaseLine{{SKU: sku, Quantity: 2, RoundID: 1}},
			Guard:  &Guard{Key: guard, Field: "status", From: []string{"pending"}, To: "cancelled"},
			Outbox: &Outbox{Stream: c.Prefix + "orders:" + tag, Values: []string{"kind", "transition"}}})
		if err != nil || r.Units != 2 {
			t.Fatalf("release of %s: %+v %v", sku, r, err)
		}
		live, ok, err := s.Live(ctx, sku)
		if err != nil || !ok || live.Available != 5 || live.PriceCents != 200 {
			t.Fatalf("live %s: %+v %v %v", sku, live, ok, err)
		}
	}
	// Available pipelines over every master.
	avail, err := s.Available(ctx, "sku-0", "sku-1", "sku-2", "sku-3", "nothing")
	if err != nil || len(avail) != 5 || avail[0] != 5 || avail[4] != 0 {
		t.Fatalf("available: %v %v", avail, err)
	}
	if err := s.Close(ctx, "sku-0"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Live(ctx, "sku-0"); ok {
		t.Fatal("sku-0's sale outlived Close")
	}
}

// The change messages of a grouped SKU name it: the live hub's pattern
// matches its channel and ParseChange reads the SKU back; a channel whose
// tag is not the SKU's partition is refused.
func TestGroupedChangesChannel(t *testing.T) {
	parts := keyspace.NewPartitions(4, true)
	s := NewPartitionedStock(nil, "p:", parts)
	ch := s.ChangesChannel("a-1")
	if c, err := s.ParseChange(ch, "1 2 0 0"); err != nil || c.SKU != "a-1" || c.Available != 2 {
		t.Fatalf("ParseChange(%s): %+v %v", ch, c, err)
	}
	other := parts.Tag((parts.Of("a-1") + 1) % 4)
	if _, err := s.ParseChange("p:sale:"+other+"a-1:changed", "1 2 0 0"); err == nil {
		t.Fatal("a channel in another partition's tag was taken for a-1's")
	}
	if _, err := NewPartitionedStock(nil, "p:", parts).ParseChange("p:sale:{a-1}:changed", "1 2 0 0"); err == nil {
		t.Fatal("an ungrouped channel was read by a grouped stock")
	}
}

// On a cluster every stock change is SPUBLISHed, on the master of the
// SKU's slot only: seed, release, restore and close, for SKUs on each of
// the three masters, reach a sharded subscriber (SSUBSCRIBE) in order, and
// the masters' command counts show SPUBLISH once per change and no
// PUBLISH (which the cluster bus would broadcast to every node).
func TestStockChangesAreShardedOnACluster(t *testing.T) {
	t.Parallel()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	s := NewPartitionedStock(rdb, c.Prefix, keyspace.NewPartitions(12, true))
	if !s.ShardedChanges() || s.PublishCommand() != "SPUBLISH" {
		t.Fatalf("a grouped stock publishes with %s", s.PublishCommand())
	}
	skus := skusOnEveryMaster(t, c, s)
	if err := c.Client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ConfigResetStat(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	subs := map[string]*redis.PubSub{}
	for _, sku := range skus {
		ps := rdb.SSubscribe(ctx, s.ChangesChannel(sku))
		t.Cleanup(func() { _ = ps.Close() })
		if _, err := ps.Receive(ctx); err != nil { // the confirmation
			t.Fatal(err)
		}
		subs[sku] = ps
	}
	for _, sku := range skus {
		if err := s.OpenRound(ctx, sku, LiveRound{Round: 1, Quantity: 5, PerUserLimit: 2, PriceCents: 100}); err != nil {
			t.Fatal(err)
		}
		rdb.HIncrBy(ctx, s.SaleKey(sku), "available", -2)
		rdb.HIncrBy(ctx, s.BuyersKey(sku), "u1", 2)
		if _, err := s.Release(ctx, Release{OrderID: "o1", UserID: "u1",
			Lines: []ReleaseLine{{SKU: sku, Quantity: 2, RoundID: 1}}}); err != nil {
			t.Fatal(err)
		}
		fence, err := s.ReadFence(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Restore(ctx, sku, fence, Restored{LiveRound: LiveRound{Round: 1, Quantity: 5, Available: 4,
			PerUserLimit: 2, PriceCents: 100}, Buyers: map[string]int64{"u2": 1}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx, sku); err != nil {
			t.Fatal(err)
		}
	}
	// Four changes per SKU, each SPUBLISHed once on its SKU's master.
	want := map[string]int{}
	for _, sku := range skus {
		m, err := c.Client.MasterForKey(ctx, s.SaleKey(sku))
		if err != nil {
			t.Fatal(err)
		}
		want[m.Options().Addr] += 4
	}
	if err := c.Client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		stats, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		if n := commandCalls(stats, "publish"); n != 0 {
			return fmt.Errorf("%s: %d PUBLISH calls", m.Options().Addr, n)
		}
		if n := commandCalls(stats, "spublish"); n != want[m.Options().Addr] {
			return fmt.Errorf("%s: %d SPUBLISH calls, want %d", m.Options().Addr, n, want[m.Options().Addr])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, sku := range skus {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a bound on a hang, not a timing
		for i, payload := range []string{"1 5 0 0 2 0", "1 5 0 0 2", "1 4 0 0 2 0", closedMessage} {
			m, err := subs[sku].ReceiveMessage(rctx)
			if err != nil || m.Channel != s.ChangesChannel(sku) || m.Payload != payload {
				t.Fatalf("%s: change %d: %+v %v, want %q", sku, i, m, err, payload)
			}
		}
		cancel()
	}
}

// skusOnEveryMaster returns SKUs whose keys fall on each master of c, two
// per master.
func skusOnEveryMaster(t *testing.T, c *testenv.RedisCluster, s *Stock) []string {
	t.Helper()
	per := map[string]int{}
	var skus []string
	for i := 0; len(skus) < 2*len(c.Masters); i++ {
		sku := fmt.Sprintf("sku-%d", i)
		m, err := c.Client.MasterForKey(context.Background(), s.SaleKey(sku))
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; per[addr] < 2 {
			per[addr]++
			skus = append(skus, sku)
		}
		if i > 1000 {
			t.Fatalf("SKUs on %d masters only: %v", len(per), per)
		}
	}
	return skus
}

// commandCalls reads a command's call count from INFO commandstats.
func commandCalls(stats, cmd string) int {
	for _, line := range strings.Split(stats, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// A cluster move interrupted after its first step (a crash) leaves its
// units on their way, counted by the source's moving and the round's
// unsold sum, never lost: the sweeper's FinishMoves, once the record is
// past its deadline, brings them in once, however often it runs, and a
// move whose target round was replaced meanwhile adds nothing there.
func TestClusterMoveFinishedAfterACrash(t *testing.T) {
	t.Parallel()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	s := NewPartitionedStock(rdb, c.Prefix, keyspace.NewPartitions(6, true))
	sku := "hot"
	if err := s.OpenRound(ctx, sku, LiveRound{Round: 1, Quantity: 12, Buckets: 3}); err != nil {
		t.Fatal(err)
	}
	crashed := false
	s.faultAfterMoveOut = func() error {
		crashed = true
		return fmt.Errorf("simulated crash")
	}
	if err := s.MoveInto(ctx, sku, 1, 7, 3); err == nil || !crashed {
		t.Fatalf("a move that crashed after its first step: %v", err)
	}
	s.faultAfterMoveOut = nil
	states := readStates(t, s, sku, 3)
	if sumOf(states, "available") >= 12 || sumOf(states, "moving") == 0 || unsoldOf(states) != 12 {
		t.Fatalf("after the crash: %v, want units moving, none lost", states)
	}
	if n, err := s.FinishMoves(ctx); err != nil || n != 0 {
		t.Fatalf("FinishMoves before the deadline: %d %v, want none finished", n, err)
	}
	inOnly(t, s, sku, 3) // a repair that crashed between its two steps
	pastDeadline(t, s)
	for range 2 { // a second sweeper, or the next sweep: nothing more
		if _, err := s.FinishMoves(ctx); err != nil {
			t.Fatal(err)
		}
	}
	states = readStates(t, s, sku, 3)
	if sumOf(states, "available") != 12 || sumOf(states, "moving") != 0 || sumOf(states, "moved_in") != sumOf(states, "moved_out") {
		t.Fatalf("after FinishMoves: %v, want all 12 available, none moving", states)
	}
	if avail, _ := strconv.Atoi(states[1]["available"]); avail < 7 {
		t.Fatalf("the home bucket holds %d, want at least the 7 asked", avail)
	}

	// Crashed again, and the round replaced before the repair: the new
	// round's buckets get nothing from the old one's move.
	s.faultAfterMoveOut = func() error { return fmt.Errorf("simulated crash") }
	if err := s.MoveInto(ctx, sku, 0, 10, 3); err == nil {
		t.Fatal("the second move did not crash")
	}
	s.faultAfterMoveOut = nil
	if err := s.OpenRound(ctx, sku, LiveRound{Round: 2, Quantity: 6, Buckets: 3}); err != nil {
		t.Fatal(err)
	}
	pastDeadline(t, s)
	if _, err := s.FinishMoves(ctx); err != nil {
		t.Fatal(err)
	}
	states = readStates(t, s, sku, 3)
	if sumOf(states, "available") != 6 || sumOf(states, "moving") != 0 {
		t.Fatalf("round 2 after the old round's move was finished: %v, want its own 6", states)
	}
	for p := range 6 {
		if n := rdb.ZCard(ctx, s.movesIndexOf(p)).Val(); n != 0 {
			t.Fatalf("partition %d's moves index holds %d entries after the repair", p, n)
		}
	}
}

func readStates(t *testing.T, s *Stock, sku string, buckets int) []map[string]string {
	t.Helper()
	out := make([]map[string]string, buckets)
	for b := range buckets {
		out[b] = s.rdb.HGetAll(context.Background(), s.BucketKey(sku, b, buckets)).Val()
	}
	return out
}

func sumOf(states []map[string]string, field string) int64 {
	var n int64
	for _, m := range states {
		v, _ := strconv.ParseInt(m[field], 10, 64)
		n += v
	}
	return n
}

func unsoldOf(states []map[string]string) int64 {
	return sumOf(states, "available") + sumOf(states, "moved_out") - sumOf(states, "moved_in")
}

// inOnly runs the second step of every move of sku's round that has a
// record, and not the third, as a repair that stopped between them.
func inOnly(t *testing.T, s *Stock, sku string, buckets int) {
	t.Helper()
	ctx := context.Background()
	for b := range buckets {
		src := s.BucketKey(sku, b, buckets)
		for id, rec := range s.rdb.HGetAll(ctx, src+":moves").Val() {
			var dst int
			var k, released int64
			var round string
			if _, err := fmt.Sscanf(rec, "%d %d %d %s", &dst, &k, &released, &round); err != nil {
				t.Fatal(err)
			}
			in := s.BucketKey(sku, dst, buckets)
			if err := moveInScript.Run(ctx, s.rdb, []string{in, in + ":moved"}, id, round, k, released).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pastDeadline puts every move's index entry past its deadline, as time
// would.
func pastDeadline(t *testing.T, s *Stock) {
	t.Helper()
	ctx := context.Background()
	for p := range s.parts.Count() {
		for _, m := range s.rdb.ZRange(ctx, s.movesIndexOf(p), 0, -1).Val() {
			s.rdb.ZAdd(ctx, s.movesIndexOf(p), redis.Z{Score: 1, Member: m})
		}
	}
}
