package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/testenv"
)

// reserveFixture runs the reserve script against real Redis, through an
// order service that has no database (placing needs Redis only).
type reserveFixture struct {
	*inventory.Stock
	svc *Service
	r   *testenv.Redis
}

func newReserveFixture(t testing.TB) *reserveFixture {
	t.Helper()
	r := testenv.NewRedis(t)
	stock := inventory.NewStock(r.Client, r.Prefix)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := New(nil, r.Client, stock, nil, r.Prefix, log, prometheus.NewRegistry(), Options{})
	return &reserveFixture{Stock: stock, svc: svc, r: r}
}

// seedEach opens a round of quantity units of each of skus, without a
// limit per buyer.
func (f *reserveFixture) seedEach(t testing.TB, quantity int64, skus ...string) {
	t.Helper()
	for _, sku := range skus {
		f.seed(t, sku, inventory.LiveRound{Quantity: quantity, PerUserLimit: 0})
	}
}

func (f *reserveFixture) seed(t testing.TB, sku string, r inventory.LiveRound) {
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

func (f *reserveFixture) enqueue(user, idem string) enqueue {
	e := enqueue{orderID: uuid.NewString(), userID: user}
	if idem != "" {
		e.idemKey, e.fingerprint = f.svc.keys.Idem(user, idem), "test-request"
	}
	return e
}

func (f *reserveFixture) buy(t testing.TB, user string, lines ...Line) (reservation, error) {
	t.Helper()
	return f.svc.reserve(context.Background(), f.enqueue(user, ""), lines)
}

func (f *reserveFixture) available(t *testing.T, sku string) int64 {
	t.Helper()
	a, err := f.Available(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a[0]
}

func (f *reserveFixture) streamLen(t *testing.T) int64 {
	t.Helper()
	return f.r.Client.XLen(context.Background(), f.r.Prefix+"orders").Val()
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error = %v, want %s", err, code)
	}
}

func TestReserveBranches(t *testing.T) {
	t.Parallel()
	hour := time.Hour
	tests := []struct {
		name      string
		round     inventory.LiveRound
		attempts  []int // quantities bought in turn by one user
		wantCodes []string
		left      int64
	}{
		{"exact_last_unit", inventory.LiveRound{Quantity: 1}, []int{1, 1}, []string{"", "out_of_stock"}, 0},
		{"sold_out", inventory.LiveRound{Quantity: 0, PerUserLimit: 0}, []int{1}, []string{"out_of_stock"}, 0},
		{"multi_quantity", inventory.LiveRound{Quantity: 5}, []int{3, 3, 2}, []string{"", "out_of_stock", ""}, 0},
		{"limit", inventory.LiveRound{Quantity: 10, PerUserLimit: 2}, []int{1, 1, 1}, []string{"", "", "limit_exceeded"}, 8},
		{"limit_in_one_go", inventory.LiveRound{Quantity: 10, PerUserLimit: 2}, []int{3, 2}, []string{"limit_exceeded", ""}, 8},
		{"unlimited", inventory.LiveRound{Quantity: 10, PerUserLimit: 0}, []int{4, 4, 4}, []string{"", "", "out_of_stock"}, 2},
		{"not_started", inventory.LiveRound{Quantity: 5, StartsAt: time.Now().Add(hour)}, []int{1}, []string{"sale_not_active"}, 5},
		{"ended", inventory.LiveRound{Quantity: 5, StartsAt: time.Now().Add(-2 * hour), EndsAt: time.Now().Add(-hour)}, []int{1}, []string{"sale_not_active"}, 5},
		{"open_window", inventory.LiveRound{Quantity: 5, StartsAt: time.Now().Add(-hour), EndsAt: time.Now().Add(hour)}, []int{1}, []string{""}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newReserveFixture(t)
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
	f := newReserveFixture(t)
	_, err := f.buy(t, "u1", Line{"ghost", 1})
	var ns *noSaleError
	if !errors.As(err, &ns) || len(ns.skus) != 1 || ns.skus[0] != "ghost" {
		t.Fatalf("error = %v, want NoSaleError for ghost", err)
	}
}

func TestReserveWritesEventStatusAndIndex(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "a", inventory.LiveRound{Round: 7, Quantity: 3, PriceCents: 1999})
	f.seed(t, "b", inventory.LiveRound{Round: 9, Quantity: 3, PriceCents: 5})
	e := f.enqueue("u1", "")
	res, err := f.svc.reserve(context.Background(), e, []Line{{"a", 2}, {"b", 1}})
	if err != nil {
		t.Fatal(err)
	}
	items, err := res.items()
	if err != nil || res.totalCents != 2*1999+5 || len(items) != 2 || items[0].RoundID != 7 || items[1].PriceCents != 5 {
		t.Fatalf("reservation = %+v, items %+v %v", res, items, err)
	}
	ctx := context.Background()
	msgs := f.r.Client.XRange(ctx, f.svc.keys.Stream(0), "-", "+").Val()
	if len(msgs) != 1 {
		t.Fatalf("stream = %v", msgs)
	}
	v := msgs[0].Values
	if v["order_id"] != e.orderID || v["user_id"] != "u1" || v["total_cents"] != "4003" || v["items"] == "" {
		t.Errorf("event = %v", v)
	}
	st := f.r.Client.HGetAll(ctx, f.svc.keys.Status(e.orderID)).Val()
	if st["status"] != "pending" || st["user_id"] != "u1" || st["total_cents"] != "4003" {
		t.Errorf("status = %v", st)
	}
	if ttl := f.r.Client.PTTL(ctx, f.svc.keys.Status(e.orderID)).Val(); ttl <= 0 {
		t.Errorf("status key TTL = %s, want one", ttl)
	}
	if f.r.Client.ZScore(ctx, f.svc.keys.Pending("u1"), e.orderID).Err() != nil {
		t.Error("order not in the buyer's pending index")
	}
	if b := f.r.Client.HGet(ctx, f.BuyersKey("a"), "u1").Val(); b != "2" {
		t.Errorf("buyer count = %q, want 2", b)
	}
}

// TestReserveWritesNoDefaults: what reads as its default when absent is
// not written: a partition-0 order's status has no partition field, and an
// item of a round that gave nothing back has no released, in the event and
// the status alike; a round that did keeps its count.
func TestReserveWritesNoDefaults(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "a", inventory.LiveRound{Round: 7, Quantity: 3, PriceCents: 10})
	f.seed(t, "b", inventory.LiveRound{Round: 9, Quantity: 3, PriceCents: 5})
	ctx := context.Background()
	f.r.Client.HSet(ctx, f.SaleKey("b"), "released", 4)
	e := f.enqueue("u1", "")
	if _, err := f.svc.reserve(ctx, e, []Line{{"a", 1}, {"b", 1}}); err != nil {
		t.Fatal(err)
	}
	st := f.r.Client.HGetAll(ctx, f.svc.keys.Status(e.orderID)).Val()
	if _, ok := st["partition"]; ok {
		t.Errorf("status = %v: a partition-0 order wrote its partition", st)
	}
	msgs := f.r.Client.XRange(ctx, f.svc.keys.Stream(0), "-", "+").Val()
	if len(msgs) != 1 {
		t.Fatalf("stream = %v", msgs)
	}
	for where, text := range map[string]any{"status": st["items"], "event": msgs[0].Values["items"]} {
		var items []map[string]any
		if err := json.Unmarshal([]byte(text.(string)), &items); err != nil || len(items) != 2 {
			t.Fatalf("%s items = %v (%v)", where, text, err)
		}
		if _, ok := items[0]["released"]; ok {
			t.Errorf("%s items = %v: a round with nothing released wrote released", where, text)
		}
		if items[1]["released"] != 4.0 {
			t.Errorf("%s items = %v: want released 4 for b", where, text)
		}
	}
	o, found, err := f.svc.liveStatus(ctx, e.orderID)
	if err != nil || !found || o.partition != 0 || o.TotalCents != 15 {
		t.Errorf("live status = %+v %v %v", o, found, err)
	}
}

// TestReserveBuyerCountsExpireWithTheSale: a sale with an end expires, and
// its buyer counts never before it; counts that already outlive it are
// left alone (no PEXPIRE to append on each purchase).
func TestReserveBuyerCountsExpireWithTheSale(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "a", inventory.LiveRound{Quantity: 10, EndsAt: time.Now().Add(time.Hour)})
	ctx := context.Background()
	sale, buyers := f.SaleKey("a"), f.BuyersKey("a")
	// Absolute expiry times (PEXPIRETIME): they do not run down between reads.
	at := func(key string) time.Duration { return f.r.Client.PExpireTime(ctx, key).Val() }
	if _, err := f.buy(t, "u1", Line{"a", 1}); err != nil {
		t.Fatal(err)
	}
	if s, b := at(sale), at(buyers); s <= 0 || b < s {
		t.Fatalf("sale expires at %v, buyer counts at %v: the counts would expire first", s, b)
	}
	// Counts set to outlive the sale by an hour are not written again.
	f.r.Client.PExpire(ctx, buyers, f.r.Client.PTTL(ctx, sale).Val()+time.Hour)
	later := at(buyers)
	if _, err := f.buy(t, "u2", Line{"a", 1}); err != nil {
		t.Fatal(err)
	}
	if b := at(buyers); b != later {
		t.Errorf("buyer counts expire at %v, want %v: written again", b, later)
	}
	// Counts that would expire before the sale are extended to it.
	f.r.Client.PExpire(ctx, buyers, time.Minute)
	if _, err := f.buy(t, "u3", Line{"a", 1}); err != nil {
		t.Fatal(err)
	}
	if s, b := at(sale), at(buyers); b < s {
		t.Errorf("sale expires at %v, buyer counts at %v: the counts would expire first", s, b)
	}
}

func TestReserveIsAllOrNothing(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "plenty", inventory.LiveRound{Quantity: 100, PerUserLimit: 0})
	f.seed(t, "short1", inventory.LiveRound{Quantity: 1, PerUserLimit: 0})
	f.seed(t, "short2", inventory.LiveRound{Quantity: 0, PerUserLimit: 0})
	_, err := f.buy(t, "u1", Line{"plenty", 5}, Line{"short1", 2}, Line{"short2", 1})
	wantCode(t, err, apperr.CodeOutOfStock)
	var e *apperr.Error
	errors.As(err, &e)
	if skus, _ := e.Extra["skus"].([]string); len(skus) != 2 || skus[0] != "short1" || skus[1] != "short2" {
		t.Errorf("skus = %v, want [short1 short2]", e.Extra["skus"])
	}
	if f.available(t, "plenty") != 100 || f.available(t, "short1") != 1 || f.streamLen(t) != 0 {
		t.Fatal("a refused reservation changed something")
	}
	if n := f.r.Client.HLen(context.Background(), f.BuyersKey("plenty")).Val(); n != 0 {
		t.Fatalf("buyer counted on a refused reservation")
	}
}

func TestReserveIdempotentRepeat(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "s", inventory.LiveRound{Quantity: 10, PerUserLimit: 0})
	first, err := f.svc.reserve(context.Background(), f.enqueue("u1", "key-1"), []Line{{"s", 2}})
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.reserve(context.Background(), f.enqueue("u1", "key-1"), []Line{{"s", 2}})
	if err != nil || !again.replayed || again.orderID != first.orderID {
		t.Fatalf("repeat = %+v %v, want a replay of %s", again, err, first.orderID)
	}
	if f.available(t, "s") != 8 || f.streamLen(t) != 1 {
		t.Fatal("the repeat bought again")
	}
	// The key is per user: another user's same key is a new purchase.
	other, err := f.svc.reserve(context.Background(), f.enqueue("u2", "key-1"), []Line{{"s", 2}})
	if err != nil || other.replayed {
		t.Fatalf("other user: %+v %v", other, err)
	}
}

// The same invocation run twice (a command resent after its reply was
// lost, by any layer) buys once, even without an Idempotency-Key: the order
// id is made before the script runs, and a second run finds its status.
func TestReserveSameOrderIDBuysOnce(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "s", inventory.LiveRound{Quantity: 10, PerUserLimit: 3})
	e := f.enqueue("u1", "")
	first, err := f.svc.reserve(context.Background(), e, []Line{{"s", 2}})
	if err != nil || first.replayed {
		t.Fatalf("first run = %+v %v", first, err)
	}
	again, err := f.svc.reserve(context.Background(), e, []Line{{"s", 2}})
	if err != nil || !again.replayed || again.orderID != e.orderID {
		t.Fatalf("second run = %+v %v, want a replay of %s", again, err, e.orderID)
	}
	bought, _ := f.r.Client.HGet(context.Background(), f.BuyersKey("s"), "u1").Int()
	if f.available(t, "s") != 8 || f.streamLen(t) != 1 || bought != 2 {
		t.Fatalf("available %d, events %d, u1 bought %d: the second run bought again", f.available(t, "s"), f.streamLen(t), bought)
	}
}

func TestReserveRejectsBadInputBeforeWriting(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "s", inventory.LiveRound{Quantity: 10})
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

// race releases users buyers of sku together, each calling buy tries
// times, and checks that exactly units were sold, one event each, with
// nothing left and never more per user than limit.
func (f *reserveFixture) race(t *testing.T, sku string, units int64, users, tries int, limit int64, buy func(user string) error) {
	t.Helper()
	var sold atomic.Int64
	perUser := make([]atomic.Int64, users)
	var ops []func()
	for u := range users {
		one := func() {
			switch err := buy("user-" + strconv.Itoa(u)); {
			case err == nil:
				sold.Add(1)
				perUser[u].Add(1)
			case errors.Is(err, ErrOutOfStock), errors.Is(err, ErrLimitExceeded):
			default:
				t.Error(err)
			}
		}
		ops = append(ops, slices.Repeat([]func(){one}, tries)...)
	}
	ordertesting.Together(ops...)
	if sold.Load() != units || f.available(t, sku) != 0 || f.streamLen(t) != units {
		t.Fatalf("sold %d, available %d, events %d; want %d, 0, %d",
			sold.Load(), f.available(t, sku), f.streamLen(t), units, units)
	}
	for u := range perUser {
		if n := perUser[u].Load(); n > limit {
			t.Fatalf("user %d bought %d, limit %d", u, n, limit)
		}
	}
}

// The oversell race: buyers released together, each trying several times.
// Exactly the seeded units are sold, never more per user than the limit,
// and every success has exactly one event.
func TestReserveRaceNeverOversells(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	const units, users, tries, limit = 100, 150, 3, 1
	f.seed(t, "hot", inventory.LiveRound{Quantity: units, PerUserLimit: limit})
	f.race(t, "hot", units, users, tries, limit, func(user string) error {
		_, err := f.buy(t, user, Line{"hot", 1})
		return err
	})
}

func TestSetPriceOnlyTouchesLiveRounds(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	ctx := context.Background()
	f.seed(t, "s", inventory.LiveRound{Quantity: 1, PriceCents: 100})
	if err := f.SetPrice(ctx, "s", 120); err != nil {
		t.Fatal(err)
	}
	if err := f.SetPrice(ctx, "none", 120); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := f.Live(ctx, "s"); r.PriceCents != 120 {
		t.Errorf("price = %d", r.PriceCents)
	}
	if f.r.Client.Exists(ctx, f.SaleKey("none")).Val() != 0 {
		t.Error("SetPrice created a sale for a SKU without one")
	}
	res, err := f.buy(t, "u", Line{"s", 1})
	if err != nil || res.totalCents != 120 {
		t.Fatalf("bought at %d (%v), want the new price", res.totalCents, err)
	}
}

func TestReserveCheckoutEmptiesTheCartOrRefusesAChangedOne(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	ctx := context.Background()
	f.seedEach(t, 10, "a", "b")
	cart := f.r.Prefix + "cart:{u1}"
	f.r.Client.HSet(ctx, cart, "a", 2, "b", 1)
	lines := []Line{{"a", 2}, {"b", 1}}

	changed := [][]Line{{{"a", 2}}, {{"a", 1}, {"b", 1}}, {{"a", 2}, {"b", 1}, {"c", 1}}}
	for _, ls := range changed {
		e := f.enqueue("u1", "")
		e.cartKey = cart
		if _, err := f.svc.reserve(ctx, e, ls); !errors.Is(err, ErrCartChanged) {
			t.Fatalf("lines %v against the cart: %v, want ErrCartChanged", ls, err)
		}
	}
	if f.available(t, "a") != 10 || f.streamLen(t) != 0 || f.r.Client.HLen(ctx, cart).Val() != 2 {
		t.Fatal("a refused checkout changed something")
	}
	e := f.enqueue("u1", "")
	e.cartKey = cart
	if _, err := f.svc.reserve(ctx, e, lines); err != nil {
		t.Fatal(err)
	}
	if f.r.Client.Exists(ctx, cart).Val() != 0 || f.available(t, "a") != 8 || f.available(t, "b") != 9 {
		t.Fatal("checkout did not empty the cart and take the stock")
	}
}

// An Idempotency-Key stands for one request: the same key with another SKU,
// quantity or route is refused and changes nothing; the same request again
// is the first answer.
func TestReserveIdempotencyKeyIsTiedToItsRequest(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	ctx := context.Background()
	f.seedEach(t, 10, "s", "t")
	buy := func(checkout bool, lines ...Line) (reservation, error) {
		e := f.enqueue("u1", "key-1")
		e.fingerprint = fingerprint(lines, checkout)
		return f.svc.reserve(ctx, e, lines)
	}
	first, err := buy(false, Line{"s", 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, other := range map[string]func() (reservation, error){
		"other_quantity": func() (reservation, error) { return buy(false, Line{"s", 3}) },
		"other_sku":      func() (reservation, error) { return buy(false, Line{"t", 2}) },
		"checkout":       func() (reservation, error) { return buy(true, Line{"s", 2}) },
	} {
		if r, err := other(); !errors.Is(err, ErrIdempotencyKeyReused) {
			t.Errorf("%s: %+v %v, want idempotency_key_reused", name, r, err)
		}
	}
	if f.available(t, "s") != 8 || f.available(t, "t") != 10 || f.streamLen(t) != 1 {
		t.Fatal("a reused key bought something")
	}
	again, err := buy(false, Line{"s", 2})
	if err != nil || !again.replayed || again.orderID != first.orderID {
		t.Fatalf("same request = %+v %v, want the first answer", again, err)
	}
}

// A sale state the script cannot read whole (a field missing, a buyers key
// of the wrong type, as a bug or an operator's hand might leave them) is
// refused before any write: no stock taken without its order event.
func TestReserveRefusesUnreadableSaleStateBeforeWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, corrupt := range map[string]func(f *reserveFixture){
		"no_price":        func(f *reserveFixture) { f.r.Client.HDel(ctx, f.SaleKey("s"), "price_cents") },
		"text_limit":      func(f *reserveFixture) { f.r.Client.HSet(ctx, f.SaleKey("s"), "limit", "many") },
		"buyers_a_string": func(f *reserveFixture) { f.r.Client.Set(ctx, f.BuyersKey("s"), "x", 0) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newReserveFixture(t)
			f.seedEach(t, 5, "ok", "s")
			corrupt(f)
			if _, err := f.buy(t, "u1", Line{"ok", 1}, Line{"s", 2}); err == nil {
				t.Fatal("a corrupt sale state was bought from")
			}
			left, _ := f.r.Client.HGet(ctx, f.SaleKey("s"), "available").Int64()
			if f.available(t, "ok") != 5 || left != 5 || f.streamLen(t) != 0 || f.r.Client.HLen(ctx, f.BuyersKey("ok")).Val() != 0 {
				t.Fatalf("available ok=%d s=%d, events %d: the refused reservation wrote something", f.available(t, "ok"), left, f.streamLen(t))
			}
		})
	}
}

// items are the reserved lines of r, for the tests that read them.
func (r reservation) items() ([]ReservedItem, error) {
	var items []ReservedItem
	if err := json.Unmarshal([]byte(r.itemsJSON), &items); err != nil {
		return nil, fmt.Errorf("reserve order %s: items: %w", r.orderID, err)
	}
	return items, nil
}

// A reservation that runs past its caller's deadline (it waited in a
// stalled Redis while the buyer was answered 503) reserves nothing and
// answers 503; a repeat of a reservation that did run still tells so.
func TestReserveRunningLateReservesNothing(t *testing.T) {
	t.Parallel()
	f := newReserveFixture(t)
	f.seed(t, "late", inventory.LiveRound{Quantity: 10, PerUserLimit: 3})
	// Deadline minus the reply's slack is in the past: Redis's TIME is late.
	late, cancel := context.WithTimeout(context.Background(), replySlack/2)
	defer cancel()
	e := f.enqueue("u1", "")
	_, err := f.svc.reserve(late, e, []Line{{"late", 2}})
	if !errors.Is(err, errLate) {
		t.Fatalf("late run: %v, want errLate", err)
	}
	wantCode(t, err, apperr.CodeUnavailable)
	bought, _ := f.r.Client.HGet(context.Background(), f.BuyersKey("late"), "u1").Int()
	if f.available(t, "late") != 10 || f.streamLen(t) != 0 || bought != 0 ||
		f.r.Client.Exists(context.Background(), f.svc.keys.Status(e.orderID)).Val() != 0 {
		t.Fatalf("a late run held something: available %d, events %d, bought %d", f.available(t, "late"), f.streamLen(t), bought)
	}
	// In time, then repeated late: the repeat answers the order.
	inTime, cancel2 := context.WithTimeout(context.Background(), placeTimeout)
	defer cancel2()
	if _, err := f.svc.reserve(inTime, e, []Line{{"late", 2}}); err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.reserve(late, e, []Line{{"late", 2}})
	if err != nil || !again.replayed {
		t.Fatalf("late repeat of a reservation made: %+v %v, want a replay", again, err)
	}
}
