package recoverytest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/recovery"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// placedOrder is one order the test placed, as the test knows it.
type placedOrder struct {
	id, user string
	lines    []order.Line
	final    string // "", or cancelled
}

// A failover on a single Redis whose orders are spread over 3 partitions
// loses something of each: a SKU of partition 2 its whole live state,
// a SKU of partition 1 its decrements and counts, partition 1's stream
// its written entries (one unwritten one left, under an old id), partition
// 2's stream whole, with an accepted order never written, and the statuses of confirmed
// orders whose home is partition 1 or 2. Recover rebuilds every round
// exactly from PostgreSQL and every partition's stream, reports the lost
// order by id, gives the statuses back with their home partition, and
// advances every stream; the audit is clean; a second run changes nothing;
// a restored order spanning partitions can be cancelled, its units going
// back in each.
func TestRecoverPartitionedStock(t *testing.T) {
	t.Parallel()
	s := &sale{App: shoptest.New(t, shoptest.Options{Config: func(c *config.Config) { c.OrderPartitions = 3 }})}
	parts := s.Config.Partitions()
	keys := ledger.New(s.Redis.Client, s.Config.KeyPrefix, parts).Partitions()
	skus := make([][]string, parts.Count())
	for i := 0; slices.ContainsFunc(skus, func(x []string) bool { return len(x) < 2 }); i++ {
		sku := fmt.Sprintf("r-%d", i)
		if p := parts.Of(sku); len(skus[p]) < 2 {
			s.Sale(t, sku, 100, 20, 0)
			skus[p] = append(skus[p], sku)
		}
	}
	ctx, rdb := context.Background(), s.Redis.Client
	users := make([]string, 3)
	for i := range users {
		users[i], _ = s.Shopper(t, fmt.Sprintf("pr%d@example.com", i))
	}
	var orders []*placedOrder
	place := func(user string, lines ...order.Line) *placedOrder {
		t.Helper()
		p, err := s.Orders.Place(ctx, user, lines, order.PlaceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o := &placedOrder{id: p.OrderID, user: user, lines: lines}
		orders = append(orders, o)
		return o
	}
	// Every SKU: a one-line order, and a two-line one with a line in the
	// next partition; one of each kind cancelled.
	var spanning *placedOrder // home partition 1, a line in partition 2, confirmed
	for p := range skus {
		for j, sku := range skus[p] {
			u := users[(p+j)%len(users)]
			place(u, order.Line{SKU: sku, Quantity: 1 + j})
			o := place(u, order.Line{SKU: sku, Quantity: 1}, order.Line{SKU: skus[(p+1)%len(skus)][1], Quantity: 2})
			if p == 1 && j == 1 {
				spanning = o
			}
		}
	}
	s.Drain(t)
	for _, o := range []*placedOrder{orders[0], orders[5]} { // one-line in 0, two-line in 1
		s.Cancel(t, o.user, o.id)
		o.final = order.StatusCancelled
	}
	s.Drain(t)
	// Two orders only the streams hold: one stays, one the failover loses.
	kept := place(users[0], order.Line{SKU: skus[1][1], Quantity: 3})
	lost := place(users[1], order.Line{SKU: skus[2][0], Quantity: 2})
	if p := parts.Of(skus[1][1]); p != 1 {
		t.Fatalf("partition %d", p)
	}
	for _, r := range s.recover(t).Rounds {
		if r.Changed {
			t.Fatalf("recovery of a sound partitioned sale changed %s: %+v", r.SKU, r)
		}
	}
	s.auditOK(t)

	// The failover.
	rdb.Unlink(ctx, s.Stock.SaleKey(skus[2][0]), s.Stock.BuyersKey(skus[2][0]), s.Stock.SaleKey(skus[2][0])+":released")
	rdb.HSet(ctx, s.Stock.SaleKey(skus[1][0]), "available", 20)
	rdb.Del(ctx, s.Stock.BuyersKey(skus[1][0]))
	all := rdb.XRange(ctx, keys[1].Stream, "-", "+").Val()
	rdb.Del(ctx, keys[1].Stream)
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys[1].Stream, ID: "1-1", Values: all[len(all)-1].Values})
	rdb.Del(ctx, keys[2].Stream) // with the lost order's entry, never written
	var restorable []string
	for _, o := range orders {
		if home := parts.Of(o.lines[0].SKU); home != 0 && o.final == "" && o != kept && o != lost {
			rdb.Del(ctx, keys[0].StatusKey(o.id))
			restorable = append(restorable, o.id)
		}
	}

	ids := make([]string, len(orders))
	for i, o := range orders {
		ids[i] = o.id
	}
	rep := s.recover(t, ids...)
	if !slices.Equal(rep.Lost, []recovery.Lost{{OrderID: lost.id, Status: order.StatusPending}}) || rep.StatusesRestored != len(restorable) {
		t.Fatalf("lost %+v, %d statuses restored; want %s, %d", rep.Lost, rep.StatusesRestored, lost.id, len(restorable))
	}
	// Each round: what the known orders hold, by buyer.
	for _, r := range rep.Rounds {
		held, buyers := map[string]int64{}, map[string]string{}
		var units int64
		for _, o := range orders {
			for _, l := range o.lines {
				if l.SKU == r.SKU && o.final == "" && o != lost {
					held[o.user] += int64(l.Quantity)
					units += int64(l.Quantity)
				}
			}
		}
		for u, n := range held {
			buyers[u] = fmt.Sprint(n)
		}
		lr, got := s.live(t, r.SKU)
		if lr.Available != 20-units || r.Held != units || len(got) != len(buyers) {
			t.Fatalf("%s: available %d, held %d, buyers %v; want %d, %d, %v", r.SKU, lr.Available, r.Held, got, 20-units, units, buyers)
		}
		for u, n := range buyers {
			if got[u] != n {
				t.Fatalf("%s: buyers %v, want %v", r.SKU, got, buyers)
			}
		}
	}
	// A restored status names its order's home: certain when its lines
	// share one partition; else one of its lines' (PostgreSQL does not
	// keep which line came first), which any writer and sweeper reach on
	// a single Redis.
	for _, o := range orders {
		if !slices.Contains(restorable, o.id) {
			continue
		}
		m := rdb.HGetAll(ctx, keys[0].StatusKey(o.id)).Val()
		p, ok := ledger.StatusHash(m).Home()
		homes := []int{}
		for _, l := range o.lines {
			homes = append(homes, parts.Of(l.SKU))
		}
		if !ok || m["status"] != order.StatusConfirmed || !slices.Contains(homes, p) ||
			(len(o.lines) == 1 && p != homes[0]) {
			t.Fatalf("restored status of %s: %v, want confirmed in partition %v", o.id, m, homes)
		}
	}
	for _, k := range keys {
		if last := rdb.XInfoStream(ctx, k.Stream).Val().LastGeneratedID; last == "1-1" || last == "" {
			t.Fatalf("%s not advanced: %q", k.Stream, last)
		}
	}
	s.auditOK(t)
	again := s.recover(t, ids...)
	if again.StatusesRestored != 0 || len(again.Lost) != 1 {
		t.Fatalf("second run: %+v", again)
	}
	for _, r := range again.Rounds {
		if r.Changed {
			t.Fatalf("second run changed %s: %+v", r.SKU, r)
		}
	}
	// The restored order spanning partitions 1 and 2 is cancelled: its
	// units go back in both, and the writer records it.
	before := [2]int64{}
	for i, l := range spanning.lines {
		lr, _ := s.live(t, l.SKU)
		before[i] = lr.Available
	}
	if o, err := s.Orders.Cancel(ctx, spanning.user, spanning.id); err != nil || o.Status != order.StatusCancelled {
		t.Fatalf("cancel a restored order: %+v %v", o, err)
	}
	for i, l := range spanning.lines {
		if lr, _ := s.live(t, l.SKU); lr.Available != before[i]+int64(l.Quantity) {
			t.Fatalf("%s after the cancellation: %d, want %d", l.SKU, lr.Available, before[i]+int64(l.Quantity))
		}
	}
	s.Drain(t)
	s.auditOK(t)
}
