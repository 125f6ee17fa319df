package recoverytest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/recovery"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// sale is a little sale with every kind of order: of "a", three buyers
// written to PostgreSQL (one paid, one cancelled, one waiting); of "b",
// one order written and one still only in the stream.
type sale struct {
	*shoptest.App
	users  []string
	orders []string // a0 a1 a2 b-written b-stream
}

func newSale(t *testing.T) *sale {
	t.Helper()
	s := &sale{App: shoptest.New(t, shoptest.Options{})}
	s.Sale(t, "a", 100, 10, 0)
	s.Sale(t, "b", 100, 5, 0)
	for i := range 3 {
		u, _ := s.Shopper(t, fmt.Sprintf("buyer%d@example.com", i))
		s.users = append(s.users, u)
		s.place(t, u, "a", i+1)
	}
	s.place(t, s.users[0], "b", 1)
	s.Drain(t)
	s.Pay(t, s.users[0], s.orders[0])
	s.Cancel(t, s.users[1], s.orders[1])
	s.Drain(t)
	s.place(t, s.users[2], "b", 2)
	return s
}

func (s *sale) place(t *testing.T, user, sku string, qty int) {
	t.Helper()
	p, err := s.Orders.Place(context.Background(), user, []order.Line{{SKU: sku, Quantity: qty}}, order.PlaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.orders = append(s.orders, p.OrderID)
}

func (s *sale) recover(t *testing.T, accepted ...string) recovery.Report {
	t.Helper()
	rep, err := recovery.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log).Run(context.Background(), accepted)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (s *sale) auditOK(t *testing.T) {
	t.Helper()
	a := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log)
	rep, err := a.Run(context.Background())
	if err != nil || !rep.OK {
		t.Fatalf("audit: %v %+v", err, rep.Problems)
	}
}

func (s *sale) live(t *testing.T, sku string) (inventory.LiveRound, map[string]string) {
	t.Helper()
	ctx := context.Background()
	lr, ok, err := s.Stock.Live(ctx, sku)
	if err != nil || !ok {
		t.Fatalf("live %s: %v %v", sku, ok, err)
	}
	return lr, s.Redis.Client.HGetAll(ctx, s.Stock.BuyersKey(sku)).Val()
}

// What a failover to a replica that lagged leaves: "a"'s live state gone
// (the seed never replicated), "b"'s decrements and counts lost, and the
// stream without its written entries. Recover rebuilds both from
// PostgreSQL and the stream, the audit is clean, a second run changes
// nothing, and the sale sells exactly what is left, no unit twice.
func TestRecoverRebuildsLostStock(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	ctx, rdb := context.Background(), s.Redis.Client
	rdb.Unlink(ctx, s.Stock.SaleKey("a"), s.Stock.BuyersKey("a"), s.Stock.SaleKey("a")+":released")
	rdb.HSet(ctx, s.Stock.SaleKey("b"), "available", 5)
	rdb.Del(ctx, s.Stock.BuyersKey("b"))
	// The stream as a replica far behind has it: only b's unwritten
	// entry, under an id older than every entry PostgreSQL recorded.
	k := s.OrderKeys()
	all := rdb.XRange(ctx, k.Stream, "-", "+").Val()
	rdb.Del(ctx, k.Stream)
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Stream, ID: "1-1", Values: all[len(all)-1].Values})

	// The statuses of the paid order and of two confirmed ones, lost too.
	for _, id := range []string{s.orders[0], s.orders[2], s.orders[3]} {
		rdb.Del(ctx, k.StatusKey(id))
	}

	rep := s.recover(t, s.orders...)
	if len(rep.Lost) != 0 || rep.Accepted != 5 || rep.StatusesRestored != 2 {
		t.Fatalf("lost %+v of %d, %d statuses restored; want none of 5, 2", rep.Lost, rep.Accepted, rep.StatusesRestored)
	}
	got := []string{}
	for _, r := range rep.Rounds {
		got = append(got, fmt.Sprintf("%s avail %d held %d released %d orders %d buyers %d changed %v",
			r.SKU, r.Available, r.Held, r.Released, r.Orders, r.Buyers, r.Changed))
	}
	want := []string{
		"a avail 6 held 4 released 2 orders 3 buyers 2 changed true",
		"b avail 2 held 3 released 0 orders 2 buyers 2 changed true",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("recovered\n%v\nwant\n%v", got, want)
	}
	a, buyersA := s.live(t, "a")
	if a.Available != 6 || a.Released != 2 || buyersA[s.users[0]] != "1" || buyersA[s.users[2]] != "3" || len(buyersA) != 2 {
		t.Fatalf("a: %+v buyers %v", a, buyersA)
	}
	// The cancelled order's units went back once: releasing it again
	// gives nothing.
	rel, err := s.Stock.Release(ctx, inventory.Release{OrderID: s.orders[1], UserID: s.users[1],
		Lines: []inventory.ReleaseLine{{SKU: "a", Quantity: 2, RoundID: a.Round}}})
	if err != nil || rel.Units != 0 || rel.Before != 1 {
		t.Fatalf("release of the cancelled order again: %+v %v", rel, err)
	}
	s.auditOK(t)

	again := s.recover(t, s.orders...)
	if again.StatusesRestored != 0 {
		t.Fatalf("second run restored %d statuses again", again.StatusesRestored)
	}
	for _, r := range again.Rounds {
		if r.Changed {
			t.Fatalf("second run changed %s: %+v", r.SKU, r)
		}
	}
	// A confirmed order whose status came back can be cancelled: its
	// units go back.
	if o, err := s.Orders.Cancel(ctx, s.users[2], s.orders[2]); err != nil || o.Status != order.StatusCancelled {
		t.Fatalf("cancel a confirmed order after recovery: %+v %v", o, err)
	}
	if a, _ := s.live(t, "a"); a.Available != 9 {
		t.Fatalf("a after the cancellation: %+v", a)
	}
	s.Drain(t)
	s.auditOK(t)
	// Exactly what is left sells: 2 of b, then sold out.
	u, _ := s.Shopper(t, "late@example.com")
	for i := range 3 {
		_, err := s.Orders.Place(ctx, u, []order.Line{{SKU: "b", Quantity: 1}}, order.PlaceOptions{})
		if (i < 2) != (err == nil) {
			t.Fatalf("purchase %d of b after recovery: %v", i, err)
		}
	}
	s.Drain(t)
	s.auditOK(t)
}

// An accepted order that neither PostgreSQL nor the streams have is
// reported by id; orders written, pending or dead-lettered are not.
func TestRecoverReportsLostOrders(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	ctx, rdb := context.Background(), s.Redis.Client
	k := s.OrderKeys()
	// A third "b" order, accepted and then lost with its event (as a
	// failover loses it), and its status hash surviving.
	s.place(t, s.users[1], "b", 1)
	lostWithStatus := s.orders[len(s.orders)-1]
	all := rdb.XRange(ctx, k.Stream, "-", "+").Val()
	rdb.XDel(ctx, k.Stream, all[len(all)-1].ID)
	gone := uuid.NewString() // accepted by a primary that died, nothing left
	// A dead-lettered order is in Redis: rejected, not lost.
	dead := uuid.NewString()
	bRound, _ := s.live(t, "b")
	rdb.XAdd(ctx, redisXAdd{k.Dead, dead, s.users[0], bRound.Round}.args())

	rep := s.recover(t, append(slices.Clone(s.orders), gone, dead)...)
	want := []recovery.Lost{{OrderID: gone}, {OrderID: lostWithStatus, Status: "pending"}}
	slices.SortFunc(want, func(a, b recovery.Lost) int { return cmp.Compare(a.OrderID, b.OrderID) })
	if !slices.Equal(rep.Lost, want) {
		t.Fatalf("lost %+v, want %+v", rep.Lost, want)
	}
	// The lost order's unit is back on sale; the dead letter's is held.
	b, buyers := s.live(t, "b")
	if b.Available != 5-3-1 || buyers[s.users[1]] != "" || buyers[s.users[0]] != "2" {
		t.Fatalf("b after recovery: %+v buyers %v", b, buyers)
	}
}

// Recover runs again and again while many buyers, released together, buy
// and a writer writes: every restore is exact or refused (the fence), so
// at the end the units add up, nobody holds more than they bought, and
// the audit is clean.
func TestRecoverDuringASale(t *testing.T) {
	t.Parallel()
	s := &sale{App: shoptest.New(t, shoptest.Options{})}
	const units, buyers = 600, 20
	s.Sale(t, "race", 100, units, 0)
	users := make([]string, buyers)
	for i := range users {
		users[i], _ = s.Shopper(t, fmt.Sprintf("racer%d@example.com", i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := s.Writer(writer.Options{Consumer: "race"})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	start := make(chan struct{})
	var wg sync.WaitGroup
	var bought atomic.Int64
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				_, err := s.Orders.Place(context.Background(), u, []order.Line{{SKU: "race", Quantity: 1}}, order.PlaceOptions{})
				if err != nil {
					return // sold out
				}
				bought.Add(1)
				time.Sleep(time.Millisecond) // spread the sale over many recoveries
			}
		}()
	}
	var restored, busy, retried atomic.Int64
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for range 4 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			<-start
			r := recovery.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log)
			for {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := r.Run(context.Background(), nil)
				if rep.Attempts > 1 {
					retried.Add(1)
				}
				switch {
				case errors.Is(err, recovery.ErrBusy):
					busy.Add(1)
				case err != nil:
					t.Error(err)
					return
				default:
					restored.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(stop)
	rwg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d units bought; %d recoveries done during the sale (%d read the stores again after the stock moved), %d gave up",
		bought.Load(), restored.Load(), retried.Load(), busy.Load())
	if restored.Load() == 0 {
		t.Fatal("no recovery completed during the sale: the race tested nothing")
	}
	if bought.Load() != units {
		t.Fatalf("bought %d of %d", bought.Load(), units)
	}
	lr, counts := s.live(t, "race")
	if lr.Available != 0 || len(counts) == 0 {
		t.Fatalf("after the sale: %+v", lr)
	}
	s.Drain(t)
	s.auditOK(t)
	if rep := s.recover(t); rep.Rounds[0].Changed || rep.Rounds[0].Available != 0 {
		t.Fatalf("recovery of a sound sale changed it: %+v", rep.Rounds)
	}
}

// A refunded order holds no units for recover, also while PostgreSQL
// still records it paid and only the stream has its refund: "a"'s live
// state lost after the refund, the rebuild gives back the refunded unit
// and takes it off its buyer, once; the audit agrees once it is written.
func TestRecoverGivesBackARefundedOrdersUnits(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	ctx, rdb := context.Background(), s.Redis.Client
	if o, err := s.Orders.Refund(ctx, s.orders[0]); err != nil || o.Status != order.StatusRefunded {
		t.Fatalf("refund: %+v %v", o, err)
	}
	rdb.Unlink(ctx, s.Stock.SaleKey("a"), s.Stock.BuyersKey("a"), s.Stock.SaleKey("a")+":released")
	s.recover(t, s.orders...)
	a, buyers := s.live(t, "a")
	// a0 (1, refunded) and a1 (2, cancelled) back; a2 (3) held.
	if a.Available != 7 || a.Released != 3 || buyers[s.users[2]] != "3" || len(buyers) != 1 {
		t.Fatalf("a after recover: %+v buyers %v, want 7 available, 3 released, only buyer 2's 3 units", a, buyers)
	}
	s.Drain(t)
	s.auditOK(t)
}
