package inventory

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/api"
	"github.com/shop-oss/shop/internal/testenv"
)

type stockFixture struct {
	*Stock
	r *testenv.Redis
}

func newStockFixture(t *testing.T) *stockFixture {
	t.Helper()
	r := testenv.NewRedis(t)
	return &stockFixture{Stock: NewStock(r.Client, r.Prefix), r: r}
}

func (f *stockFixture) seed(t *testing.T, sku string, r LiveRound) {
	t.Helper()
	if r.Round == 0 {
		r.Round = 1
	}
	if r.PriceCents == 0 {
		r.PriceCents = 250
	}
	if err := f.OpenRound(context.Background(), sku, r); err != nil {
		t.Fatal(err)
	}
}

func (f *stockFixture) enqueue(user, idem string) Enqueue {
	id := uuid.NewString()
	e := Enqueue{
		OrderID: id, UserID: user,
		StreamKey:  f.r.Prefix + "orders",
		StatusKey:  f.r.Prefix + "order:" + id,
		PendingKey: f.r.Prefix + "pending:{" + user + "}",
		StatusTTL:  time.Hour, IdemTTL: time.Hour,
	}
	if idem != "" {
		e.IdemKey = f.r.Prefix + "idem:{" + user + "}:" + idem
	}
	return e
}

func (f *stockFixture) buy(t *testing.T, user string, lines ...Line) (Reservation, error) {
	t.Helper()
	return f.Reserve(context.Background(), f.enqueue(user, ""), lines)
}

func (f *stockFixture) available(t *testing.T, sku string) int64 {
	t.Helper()
	a, err := f.Available(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a[0]
}

func (f *stockFixture) streamLen(t *testing.T) int64 {
	t.Helper()
	return f.r.Client.XLen(context.Background(), f.r.Prefix+"orders").Val()
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error = %v, want %s", err, code)
	}
}

func TestReserveBranches(t *testing.T) {
	t.Parallel()
	hour := time.Hour
	tests := []struct {
		name      string
		round     LiveRound
		attempts  []int // quantities bought in turn by one user
		wantCodes []string
		left      int64
	}{
		{"exact_last_unit", LiveRound{Quantity: 1}, []int{1, 1}, []string{"", "out_of_stock"}, 0},
		{"sold_out", LiveRound{Quantity: 0, PerUserLimit: 0}, []int{1}, []string{"out_of_stock"}, 0},
		{"multi_quantity", LiveRound{Quantity: 5}, []int{3, 3, 2}, []string{"", "out_of_stock", ""}, 0},
		{"limit", LiveRound{Quantity: 10, PerUserLimit: 2}, []int{1, 1, 1}, []string{"", "", "limit_exceeded"}, 8},
		{"limit_in_one_go", LiveRound{Quantity: 10, PerUserLimit: 2}, []int{3, 2}, []string{"limit_exceeded", ""}, 8},
		{"unlimited", LiveRound{Quantity: 10, PerUserLimit: 0}, []int{4, 4, 4}, []string{"", "", "out_of_stock"}, 2},
		{"not_started", LiveRound{Quantity: 5, StartsAt: time.Now().Add(hour)}, []int{1}, []string{"sale_not_active"}, 5},
		{"ended", LiveRound{Quantity: 5, StartsAt: time.Now().Add(-2 * hour), EndsAt: time.Now().Add(-hour)}, []int{1}, []string{"sale_not_active"}, 5},
		{"open_window", LiveRound{Quantity: 5, StartsAt: time.Now().Add(-hour), EndsAt: time.Now().Add(hour)}, []int{1}, []string{""}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newStockFixture(t)
			f.seed(t, "sku-1", tc.round)
			var ok int64
			for i, q := range tc.attempts {
				_, err := f.buy(t, "u1", Line{"sku-1", q})
				if tc.wantCodes[i] == "" {
					if err != nil {
						t.Fatalf("attempt %d: %v", i+1, err)
					}
					ok++
					continue
				}
				wantCode(t, err, tc.wantCodes[i])
			}
			if got := f.available(t, "sku-1"); got != tc.left {
				t.Errorf("available = %d, want %d", got, tc.left)
			}
			if got := f.streamLen(t); got != ok {
				t.Errorf("stream holds %d events, want one per success (%d)", got, ok)
			}
		})
	}
}

func TestReserveNoSale(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	_, err := f.buy(t, "u1", Line{"ghost", 1})
	var ns *NoSaleError
	if !errors.As(err, &ns) || len(ns.SKUs) != 1 || ns.SKUs[0] != "ghost" {
		t.Fatalf("error = %v, want NoSaleError for ghost", err)
	}
}

func TestReserveWritesEventStatusAndIndex(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	f.seed(t, "a", LiveRound{Round: 7, Quantity: 3, PriceCents: 1999})
	f.seed(t, "b", LiveRound{Round: 9, Quantity: 3, PriceCents: 5})
	e := f.enqueue("u1", "")
	res, err := f.Reserve(context.Background(), e, []Line{{"a", 2}, {"b", 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalCents != 2*1999+5 || len(res.Items) != 2 || res.Items[0].RoundID != 7 || res.Items[1].PriceCents != 5 {
		t.Fatalf("reservation = %+v", res)
	}
	ctx := context.Background()
	msgs := f.r.Client.XRange(ctx, e.StreamKey, "-", "+").Val()
	if len(msgs) != 1 {
		t.Fatalf("stream = %v", msgs)
	}
	v := msgs[0].Values
	if v["order_id"] != e.OrderID || v["user_id"] != "u1" || v["total_cents"] != "4003" || v["items"] == "" {
		t.Errorf("event = %v", v)
	}
	st := f.r.Client.HGetAll(ctx, e.StatusKey).Val()
	if st["status"] != "pending" || st["user_id"] != "u1" || st["total_cents"] != "4003" {
		t.Errorf("status = %v", st)
	}
	if ttl := f.r.Client.PTTL(ctx, e.StatusKey).Val(); ttl <= 0 {
		t.Errorf("status key TTL = %s, want one", ttl)
	}
	if f.r.Client.ZScore(ctx, e.PendingKey, e.OrderID).Err() != nil {
		t.Error("order not in the buyer's pending index")
	}
	if b := f.r.Client.HGet(ctx, f.buyersKey("a"), "u1").Val(); b != "2" {
		t.Errorf("buyer count = %q, want 2", b)
	}
}

func TestReserveIsAllOrNothing(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	f.seed(t, "plenty", LiveRound{Quantity: 100, PerUserLimit: 0})
	f.seed(t, "short1", LiveRound{Quantity: 1, PerUserLimit: 0})
	f.seed(t, "short2", LiveRound{Quantity: 0, PerUserLimit: 0})
	_, err := f.buy(t, "u1", Line{"plenty", 5}, Line{"short1", 2}, Line{"short2", 1})
	wantCode(t, err, api.CodeOutOfStock)
	var e *api.Error
	errors.As(err, &e)
	if skus, _ := e.Extra["skus"].([]string); len(skus) != 2 || skus[0] != "short1" || skus[1] != "short2" {
		t.Errorf("skus = %v, want [short1 short2]", e.Extra["skus"])
	}
	if f.available(t, "plenty") != 100 || f.available(t, "short1") != 1 || f.streamLen(t) != 0 {
		t.Fatal("a refused reservation changed something")
	}
	if n := f.r.Client.HLen(context.Background(), f.buyersKey("plenty")).Val(); n != 0 {
		t.Fatalf("buyer counted on a refused reservation")
	}
}

func TestReserveIdempotentRepeat(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	f.seed(t, "s", LiveRound{Quantity: 10, PerUserLimit: 0})
	first, err := f.Reserve(context.Background(), f.enqueue("u1", "key-1"), []Line{{"s", 2}})
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.Reserve(context.Background(), f.enqueue("u1", "key-1"), []Line{{"s", 2}})
	if err != nil || !again.Replayed || again.OrderID != first.OrderID {
		t.Fatalf("repeat = %+v %v, want a replay of %s", again, err, first.OrderID)
	}
	if f.available(t, "s") != 8 || f.streamLen(t) != 1 {
		t.Fatal("the repeat bought again")
	}
	// The key is per user: another user's same key is a new purchase.
	other, err := f.Reserve(context.Background(), f.enqueue("u2", "key-1"), []Line{{"s", 2}})
	if err != nil || other.Replayed {
		t.Fatalf("other user: %+v %v", other, err)
	}
}

// The same invocation run twice (a command resent after its reply was
// lost, by any layer) buys once, even without an Idempotency-Key: the order
// id is made before the script runs, and a second run finds its status.
func TestReserveSameOrderIDBuysOnce(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	f.seed(t, "s", LiveRound{Quantity: 10, PerUserLimit: 3})
	e := f.enqueue("u1", "")
	first, err := f.Reserve(context.Background(), e, []Line{{"s", 2}})
	if err != nil || first.Replayed {
		t.Fatalf("first run = %+v %v", first, err)
	}
	again, err := f.Reserve(context.Background(), e, []Line{{"s", 2}})
	if err != nil || !again.Replayed || again.OrderID != e.OrderID {
		t.Fatalf("second run = %+v %v, want a replay of %s", again, err, e.OrderID)
	}
	bought, _ := f.r.Client.HGet(context.Background(), f.buyersKey("s"), "u1").Int()
	if f.available(t, "s") != 8 || f.streamLen(t) != 1 || bought != 2 {
		t.Fatalf("available %d, events %d, u1 bought %d: the second run bought again", f.available(t, "s"), f.streamLen(t), bought)
	}
}

func TestReserveRejectsBadInputBeforeWriting(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	f.seed(t, "s", LiveRound{Quantity: 10})
	bad := [][]Line{
		nil,
		{{"s", 0}},
		{{"s", -1}},
		{{"s", MaxQuantity + 1}},
		{{"s", 1}, {"s", 1}},
		{{"", 1}},
	}
	for _, lines := range bad {
		if _, err := f.buy(t, "u1", lines...); err == nil {
			t.Errorf("lines %v accepted", lines)
		}
	}
	if f.available(t, "s") != 10 || f.streamLen(t) != 0 {
		t.Fatal("bad input changed the stock")
	}
}

// The oversell race: buyers released together, each trying several times.
// Exactly the seeded units are sold, never more per user than the limit,
// and every success has exactly one event.
func TestReserveRaceNeverOversells(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	const units, users, tries, limit = 100, 150, 3, 1
	f.seed(t, "hot", LiveRound{Quantity: units, PerUserLimit: limit})
	var sold atomic.Int64
	perUser := make([]atomic.Int64, users)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for u := range users {
		for range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := f.buy(t, "user-"+strconv.Itoa(u), Line{"hot", 1})
				switch {
				case err == nil:
					sold.Add(1)
					perUser[u].Add(1)
				case errors.Is(err, ErrOutOfStock), errors.Is(err, ErrLimitExceeded):
				default:
					t.Error(err)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if sold.Load() != units || f.available(t, "hot") != 0 || f.streamLen(t) != units {
		t.Fatalf("sold %d, available %d, events %d; want %d, 0, %d",
			sold.Load(), f.available(t, "hot"), f.streamLen(t), units, units)
	}
	for u := range perUser {
		if n := perUser[u].Load(); n > limit {
			t.Fatalf("user %d bought %d, limit %d", u, n, limit)
		}
	}
}

func TestSetPriceOnlyTouchesLiveRounds(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	ctx := context.Background()
	f.seed(t, "s", LiveRound{Quantity: 1, PriceCents: 100})
	if err := f.SetPrice(ctx, "s", 120); err != nil {
		t.Fatal(err)
	}
	if err := f.SetPrice(ctx, "none", 120); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := f.Live(ctx, "s"); r.PriceCents != 120 {
		t.Errorf("price = %d", r.PriceCents)
	}
	if f.r.Client.Exists(ctx, f.saleKey("none")).Val() != 0 {
		t.Error("SetPrice created a sale for a SKU without one")
	}
	res, err := f.buy(t, "u", Line{"s", 1})
	if err != nil || res.TotalCents != 120 {
		t.Fatalf("bought at %d (%v), want the new price", res.TotalCents, err)
	}
}

func TestReserveCheckoutEmptiesTheCartOrRefusesAChangedOne(t *testing.T) {
	t.Parallel()
	f := newStockFixture(t)
	ctx := context.Background()
	f.seed(t, "a", LiveRound{Quantity: 10, PerUserLimit: 0})
	f.seed(t, "b", LiveRound{Quantity: 10, PerUserLimit: 0})
	cart := f.r.Prefix + "cart:{u1}"
	f.r.Client.HSet(ctx, cart, "a", 2, "b", 1)
	lines := []Line{{"a", 2}, {"b", 1}}

	changed := [][]Line{{{"a", 2}}, {{"a", 1}, {"b", 1}}, {{"a", 2}, {"b", 1}, {"c", 1}}}
	for _, ls := range changed {
		e := f.enqueue("u1", "")
		e.CartKey = cart
		if _, err := f.Reserve(ctx, e, ls); !errors.Is(err, ErrCartChanged) {
			t.Fatalf("lines %v against the cart: %v, want ErrCartChanged", ls, err)
		}
	}
	if f.available(t, "a") != 10 || f.streamLen(t) != 0 || f.r.Client.HLen(ctx, cart).Val() != 2 {
		t.Fatal("a refused checkout changed something")
	}
	e := f.enqueue("u1", "")
	e.CartKey = cart
	if _, err := f.Reserve(ctx, e, lines); err != nil {
		t.Fatal(err)
	}
	if f.r.Client.Exists(ctx, cart).Val() != 0 || f.available(t, "a") != 8 || f.available(t, "b") != 9 {
		t.Fatal("checkout did not empty the cart and take the stock")
	}
}

func newBenchRedis(b *testing.B) *testenv.Redis { return testenv.NewRedis(b) }
