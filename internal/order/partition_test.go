package order

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order/orderkey"
)

// partitionedSales opens one round of units per SKU for n SKUs spread over
// f's partitions and returns the SKUs; it fails unless they reach at least
// min(Count, 3) partitions.
func partitionedSales(t *testing.T, f *fixture, n, units int) []string {
	t.Helper()
	skus := make([]string, n)
	used := map[int]bool{}
	for i := range skus {
		skus[i] = fmt.Sprintf("ps-%d", i)
		f.sale(t, skus[i], units, 0, 100)
		used[f.parts.Of(skus[i])] = true
	}
	if len(used) < min(f.parts.Count(), 3) {
		t.Fatalf("%d SKUs reach %d of %d partitions", n, len(used), f.parts.Count())
	}
	return skus
}

// Buyers released together over SKUs in four partitions (one- and
// two-line orders, the second line often in another partition): stock
// totals stay exact, each order's event is in its home partition only,
// and two writers of two loops each write every order exactly once.
func TestPartitionedWritersWriteEachOrderOnce(t *testing.T) {
	t.Parallel()
	f := newPartitionedFixture(t, keyspace.NewPartitions(4, false))
	const perSKU = 40
	skus := partitionedSales(t, f, 8, perSKU)
	users := []string{f.user(t), f.user(t), f.user(t), f.user(t)}
	var mu sync.Mutex
	placed := map[string][]Line{} // order id -> lines
	start1 := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start1
			for i := range 40 {
				lines := []Line{{SKU: skus[(g+i)%len(skus)], Quantity: 1}}
				if i%3 == 0 {
					lines = append(lines, Line{SKU: skus[(g+i+3)%len(skus)], Quantity: 1})
				}
				p, err := f.svc.Place(context.Background(), users[g%4], lines, PlaceOptions{})
				if err != nil {
					if !strings.Contains(err.Error(), "stock") {
						t.Error(err)
					}
					continue
				}
				mu.Lock()
				placed[p.OrderID] = lines
				mu.Unlock()
			}
		}()
	}
	close(start1)
	wg.Wait()

	taken := map[string]int64{}
	for _, lines := range placed {
		for _, l := range lines {
			taken[l.SKU] += int64(l.Quantity)
		}
	}
	ctx := context.Background()
	for _, sku := range skus {
		if a := f.available(t, sku); a+taken[sku] != perSKU {
			t.Fatalf("%s: available %d + taken %d != %d", sku, a, taken[sku], perSKU)
		}
	}
	// Each event sits in its home partition, nowhere else.
	var entries int
	for k := range f.parts.Count() {
		for _, m := range f.r.Client.XRange(ctx, f.svc.keys.Stream(k), "-", "+").Val() {
			id, _ := m.Values["order_id"].(string)
			lines, ok := placed[id]
			if !ok || f.parts.Of(lines[0].SKU) != k {
				t.Fatalf("order %s in partition %d; its lines %v", id, k, lines)
			}
			entries++
		}
	}
	if entries != len(placed) {
		t.Fatalf("%d stream entries for %d orders", entries, len(placed))
	}

	w1 := start(f.writer("w1", WriterOptions{Concurrency: 2, Batch: 7}))
	w2 := start(f.writer("w2", WriterOptions{Concurrency: 2, Batch: 5}))
	f.drained(t)
	w1.Stop(t)
	w2.Stop(t)
	if rows := f.orderRows(t); rows != int64(len(placed)) {
		t.Fatalf("rows %d, want %d", rows, len(placed))
	}
	for round, sku := range f.rounds.All() {
		if sold := f.sold(t, round); sold != taken[sku] {
			t.Fatalf("%s: sold %d, want %d", sku, sold, taken[sku])
		}
	}
	for id := range placed {
		if st := f.status(t, id); st != StatusConfirmed {
			t.Fatalf("order %s: %q, want confirmed", id, st)
		}
	}
}

// A crash after COMMIT and before XACK, in partitioned streams: every
// partition's entries come back to the restarted writer, and writing them
// again inserts nothing and sells nothing twice.
func TestPartitionedWriterCrashBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	f := newPartitionedFixture(t, keyspace.NewPartitions(3, false))
	skus := partitionedSales(t, f, 6, 5)
	u := f.user(t)
	for _, sku := range skus {
		for range 3 {
			f.place(t, u, sku, 1)
		}
	}
	w := f.writer("w1", WriterOptions{Batch: 2})
	w.InjectFaults(nil, crashOnce())
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "simulated crash") {
		t.Fatalf("Run = %v, want the simulated crash", err)
	}
	if f.pendingCount(t) == 0 {
		t.Fatal("nothing pending after a crash before XACK")
	}
	r := start(f.writer("w1", WriterOptions{}))
	f.drained(t)
	r.Stop(t)
	if rows := f.orderRows(t); rows != 18 || f.count(t, `SELECT count(*) FROM order_items`) != 18 {
		t.Fatalf("after redelivery: %d rows, want 18", rows)
	}
	for round := range f.rounds.All() {
		if sold := f.sold(t, round); sold != 3 {
			t.Fatalf("round %d: sold %d, want 3", round, sold)
		}
	}
}

// Transitions follow their order to its home partition: a cancel's outbox
// entry and an expiry's land in the partition of the order event, the
// sweeper finds due orders in every partition, and the writer records each
// transition once.
func TestPartitionedTransitionsFollowTheirOrder(t *testing.T) {
	t.Parallel()
	f := newPartitionedFixture(t, keyspace.NewPartitions(3, false))
	f.withPaymentTTL(time.Hour)
	skus := partitionedSales(t, f, 6, 5)
	u := f.user(t)
	ctx := context.Background()
	var cancelled, expiring []string
	for i, sku := range skus {
		p := f.place(t, u, sku, 1)
		if i%2 == 0 {
			cancelled = append(cancelled, p.OrderID)
		} else {
			expiring = append(expiring, p.OrderID)
		}
	}
	f.writeAll(t)
	for _, id := range cancelled {
		if _, err := f.svc.Cancel(ctx, u, id); err != nil {
			t.Fatal(err)
		}
	}
	// The payment window of the others closes now.
	for _, id := range expiring {
		o, _, _ := f.svc.life.read(ctx, id)
		f.r.Client.ZAdd(ctx, f.svc.keys.Due(o.partition), redis.Z{Score: 1, Member: id})
	}
	n, err := f.sweeper(SweeperOptions{}).Sweep(ctx)
	if err != nil || n != len(expiring) {
		t.Fatalf("swept %d (%v), want %d", n, err, len(expiring))
	}
	for k := range f.parts.Count() {
		for _, m := range f.r.Client.XRange(ctx, f.svc.keys.Stream(k), "-", "+").Val() {
			id, _ := m.Values["order_id"].(string)
			o, _, _ := f.svc.life.read(ctx, id)
			if o.partition != k || f.parts.Of(o.Items[0].SKU) != k {
				t.Fatalf("an event of order %s (home %d) in partition %d", id, o.partition, k)
			}
		}
		if n := f.r.Client.ZCard(ctx, f.svc.keys.Due(k)).Val(); n != 0 {
			t.Fatalf("partition %d's due set still holds %d orders", k, n)
		}
	}
	f.writeAll(t)
	if got := f.count(t, `SELECT count(*) FROM order_transitions`); got != int64(len(skus)) {
		t.Fatalf("%d transitions recorded, want %d", got, len(skus))
	}
	// sold counts every persisted order's units; the stock came back.
	for round, sku := range f.rounds.All() {
		if sold, a := f.sold(t, round), f.available(t, sku); sold != 1 || a != 5 {
			t.Fatalf("%s: sold %d available %d, want 1 and 5", sku, sold, a)
		}
	}
}

// On a cluster an order's id names its home, so the status hash, named from
// the id alone, shares a slot with the home's stream, due set and the first
// SKU's sale keys (the scripts that move the status and append to the
// stream need that); on a single Redis status keys keep their names.
func TestOrderIDsPutTheStatusInTheHomeSlot(t *testing.T) {
	parts := keyspace.NewPartitions(12, true)
	stock := inventory.NewPartitionedStock(nil, "p:", parts)
	s := &Service{keys: orderkey.New("p:", parts), stock: stock}
	for i := range 200 {
		lines := []Line{{SKU: fmt.Sprintf("sku-%d", i), Quantity: 1}, {SKU: "other", Quantity: 1}}
		id, err := s.newOrderID("user", lines)
		if err != nil {
			t.Fatal(err)
		}
		home := parts.Of(lines[0].SKU)
		want := keyspace.Slot(s.keys.Stream(home))
		for _, k := range []string{s.keys.Status(id), s.keys.Due(home), stock.SaleKey(lines[0].SKU)} {
			if got := keyspace.Slot(k); got != want {
				t.Fatalf("order %s (home %d): %s in slot %d, the home stream in %d", id, home, k, got, want)
			}
		}
	}
	single := orderkey.New("p:", keyspace.NewPartitions(4, false))
	if got := single.Status("abc"); got != "p:order:abc" {
		t.Fatalf("single Redis status key %q", got)
	}
}
