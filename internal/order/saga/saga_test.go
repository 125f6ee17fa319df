package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/sweeper"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order/ordertesting"
)

// heldSaga is a saga stopped after its first step: a user's order of
// one unit of a SKU on partition 1 (the order's home) and quantity of one
// on partition 5, whose second line attempt-1 holds on partition 5.
type heldSaga struct {
	user  string
	lines []order.Line
	id    string
	items []order.ReservedItem // held on partition 5
}

// holdOnFive makes a heldSaga of SKUs named after prefix, each with a
// sale of 10 units.
func (f *clusterFixture) holdOnFive(t *testing.T, prefix string, quantity int) heldSaga {
	t.Helper()
	u, lines := f.user(t), f.onOneAndFive(t, prefix, prefix, quantity)
	id := f.orderID(t, lines)
	items := f.take(t, 5, id, u, "attempt-1", lines[1:])
	return heldSaga{user: u, lines: lines, id: id, items: items}
}

// onOneAndFive is an order of one unit of a SKU of partition 1 and
// quantity of one of partition 5, named after their prefixes, each on
// sale with 10 units.
func (f *clusterFixture) onOneAndFive(t *testing.T, prefix1, prefix5 string, quantity int) []order.Line {
	t.Helper()
	return []order.Line{{SKU: f.skuIn(t, prefix1, 1, 10), Quantity: 1}, {SKU: f.skuIn(t, prefix5, 5, 10), Quantity: quantity}}
}

// orderID is a new order id for lines.
func (f *clusterFixture) orderID(t *testing.T, lines []order.Line) string {
	t.Helper()
	id, err := f.saga.NewOrderID("buyer", lines)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// group is u's lines on partition p, as the saga groups them.
func (f *clusterFixture) group(p int, u string, lines []order.Line) lineGroup {
	g := lineGroup{p: p, lines: lines}
	for _, l := range lines {
		g.places = append(g.places, f.saga.LinePlace(l.SKU, u))
	}
	return g
}

// take holds lines on partition p for order id of user u, as attempt, and
// fails t unless they are held.
func (f *clusterFixture) take(t *testing.T, p int, id, u, attempt string, lines []order.Line) []order.ReservedItem {
	t.Helper()
	items, fail, err := f.saga.hold(context.Background(), f.group(p, u, lines), id, u, "", attempt, "take", 1)
	if err != nil || fail != nil {
		t.Fatalf("hold of %s: %v %v", attempt, fail, err)
	}
	return items
}

// commitOf commits order id of user u, as attempt, with its lines held as
// held, and fails t unless it commits.
func (f *clusterFixture) commitOf(t *testing.T, id, u, attempt string, lines []order.Line, held []heldPart) reservation {
	t.Helper()
	res, fail, err := f.saga.commit(context.Background(), id, u, "", attempt, 1, "commit", lines, f.saga.linePlaces(u, lines), held)
	if err != nil || fail != nil {
		t.Fatalf("commit of %s: %v %v", attempt, fail, err)
	}
	return res
}

// restore writes the status of order id of user u, committed as res,
// back as recover does from PostgreSQL, and fails t unless it restores
// that one order.
func (f *clusterFixture) restore(t *testing.T, id, u string, res reservation) {
	t.Helper()
	var items []order.ReservedItem
	err := json.Unmarshal([]byte(res.ItemsJSON), &items)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ledger.New(f.rdb, f.c.Prefix, f.parts).RestoreStatuses(context.Background(), []ledger.Confirmed{{OrderID: id, UserID: u,
		TotalCents: res.TotalCents, CreatedAt: res.CreatedAt, Items: items}})
	if err != nil || n != 1 {
		t.Fatalf("restore of %s: %d %v", id, n, err)
	}
}

// skuIn returns a SKU (named after prefix) in partition p, with a sale of
// units opened.
func (f *clusterFixture) skuIn(t *testing.T, prefix string, p, units int) string {
	t.Helper()
	for i := 0; ; i++ {
		sku := fmt.Sprintf("%s-%d", prefix, i)
		if f.parts.Of(sku) == p {
			f.sale(t, sku, units, 0, 100)
			return sku
		}
	}
}

func (f *clusterFixture) cart(t *testing.T, user string, lines ...order.Line) string {
	t.Helper()
	key := f.c.Prefix + "cart:{" + user + "}"
	for _, l := range lines {
		if err := f.rdb.HSet(context.Background(), key, l.SKU, l.Quantity).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return key
}

// events reads every partition's order events: order id -> partition and
// items.
func (f *clusterFixture) events(t *testing.T) map[string]streamed {
	t.Helper()
	out := map[string]streamed{}
	for p := range f.parts.Count() {
		msgs, err := f.rdb.XRange(context.Background(), f.saga.keys.Stream(p), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			id, _ := m.Values["order_id"].(string)
			var items []order.ReservedItem
			if err := json.Unmarshal([]byte(m.Values["items"].(string)), &items); err != nil {
				t.Fatal(err)
			}
			if _, dup := out[id]; dup {
				t.Fatalf("order %s in two stream entries", id)
			}
			out[id] = streamed{p: p, items: items}
		}
	}
	return out
}

type streamed struct {
	p     int
	items []order.ReservedItem
}

// noHolds fails unless every partition's holds are gone.
func (f *clusterFixture) noHolds(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for p := range f.parts.Count() {
		if n := f.rdb.ZCard(ctx, f.saga.keys.Holds(p)).Val(); n != 0 {
			t.Fatalf("partition %d: %d holds left", p, n)
		}
	}
	err := f.rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if keys := m.Keys(ctx, f.c.Prefix+"orders:*:hold:*").Val(); len(keys) > 0 {
			return fmt.Errorf("hold records left: %v", keys)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *clusterFixture) clusterSweeper() *sweeper.Sweeper { return f.sweeper(RepairOptions{}) }

// A buy-now of a SKU in each of the 12 partitions (spread over the three
// masters' slot ranges) and a checkout over three partitions on three
// masters are accepted on a cluster: each order's event is in its home's
// stream with its lines, its status reads back, it is listed as pending,
// and the checkout takes out of the cart exactly the lines it bought.
func TestPurchasesOnACluster(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	u := f.user(t)
	masters := map[int64]bool{}
	var skus []string
	for p := range f.parts.Count() {
		sku := f.skuIn(t, "one", p, 5)
		skus = append(skus, sku)
		masters[f.c.Slot(t, f.stock.SaleKey(sku))*3/keyspace.Slots] = true
		pl := f.place(t, u, sku, 2)
		o, err := f.svc.Get(ctx, u, pl.OrderID)
		if err != nil || o.Status != order.StatusPending || f.home(t, o.ID) != p || len(o.Items) != 1 || o.Items[0].SKU != sku {
			t.Fatalf("order of %s: %+v %v", sku, o, err)
		}
	}
	if len(masters) != 3 {
		t.Fatalf("the SKUs reach %d masters", len(masters))
	}
	// A checkout whose lines are on three masters (partitions 1, 5, 9).
	lines := []order.Line{{SKU: skus[9], Quantity: 1}, {SKU: skus[1], Quantity: 3}, {SKU: skus[5], Quantity: 1}}
	cart := f.cart(t, u, lines...)
	f.rdb.HSet(ctx, cart, "kept", 1) // a line not bought stays
	// Each line's stock change reaches its SKU's sharded channel (the hold
	// on partitions 1 and 5, the commit on 9), as inventory publishes
	// there on a cluster.
	subs := make([]*redis.PubSub, len(lines))
	for i, l := range lines {
		subs[i] = f.rdb.SSubscribe(ctx, f.stock.ChangesChannel(l.SKU))
		defer subs[i].Close()
		if _, err := subs[i].Receive(ctx); err != nil {
			t.Fatalf("ssubscribe %s: %v", l.SKU, err)
		}
	}
	pl, err := f.svc.Place(ctx, u, lines, order.PlaceOptions{CartKey: cart})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := subs[i].ReceiveMessage(rctx)
		cancel()
		if err != nil {
			t.Fatalf("no sharded stock change of %s: %v", l.SKU, err)
		}
		if c, err := f.stock.ParseChange(m.Channel, m.Payload); err != nil || c.SKU != l.SKU || c.Available != 5-int64(l.Quantity)-2 {
			t.Fatalf("stock change of %s: %+v %v (%q)", l.SKU, c, err, m.Payload)
		}
	}
	ev := f.events(t)
	got := ev[pl.OrderID]
	if got.p != 9 || len(got.items) != 3 {
		t.Fatalf("checkout event: %+v", got)
	}
	for i, it := range got.items {
		if it.SKU != lines[i].SKU || it.Quantity != lines[i].Quantity || it.RoundID == 0 || it.PriceCents != 100 {
			t.Fatalf("checkout line %d: %+v", i, it)
		}
	}
	if len(ev) != 13 {
		t.Fatalf("%d order events, want 13", len(ev))
	}
	if left := f.rdb.HGetAll(ctx, cart).Val(); len(left) != 1 || left["kept"] != "1" {
		t.Fatalf("cart after checkout: %v", left)
	}
	f.wantAvailable(t, "", map[string]int64{skus[9]: 2, skus[1]: 0, skus[5]: 2, skus[0]: 3})
	page, err := f.svc.List(ctx, u, 50, "")
	if err != nil || len(page.Items) != 13 {
		t.Fatalf("pending listing: %d orders, %v", len(page.Items), err)
	}
	f.noHolds(t)
}

// Buy-nows and cross-shard checkouts racing over SKUs on every master,
// released together: every accepted order is in exactly one stream, its
// home's, with exactly its lines; no unit is lost or sold twice (per SKU,
// available plus the units in the streams is the stock, and the buyer
// counts are the streams' units per buyer); every refused order gave its
// holds back.
func TestSagaRaceOnACluster(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	const perSKU = 30
	var skus []string
	for p := range f.parts.Count() {
		skus = append(skus, f.skuIn(t, "race", p, perSKU))
	}
	users := []string{f.user(t), f.user(t), f.user(t), f.user(t)}
	var mu sync.Mutex
	accepted := map[string][]order.Line{}
	buyer := map[string]string{}
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			for i := range 30 {
				lines := []order.Line{{SKU: skus[(g+i)%len(skus)], Quantity: 1 + i%2}}
				if i%2 == 0 { // a checkout over two or three partitions
					lines = append(lines, order.Line{SKU: skus[(g+i+4)%len(skus)], Quantity: 1})
					if i%4 == 0 {
						lines = append(lines, order.Line{SKU: skus[(g+i+8)%len(skus)], Quantity: 2})
					}
				}
				u := users[g%len(users)]
				p, err := f.svc.Place(context.Background(), u, lines, order.PlaceOptions{})
				if err != nil {
					if !errors.Is(err, order.ErrOutOfStock) {
						t.Error(err)
					}
					continue
				}
				mu.Lock()
				accepted[p.OrderID], buyer[p.OrderID] = lines, u
				mu.Unlock()
			}
		}()
	}
	close(begin)
	wg.Wait()
	if t.Failed() {
		return
	}
	ev := f.events(t)
	if len(ev) != len(accepted) {
		t.Fatalf("%d order events for %d accepted orders", len(ev), len(accepted))
	}
	taken := map[string]int64{}
	bought := map[string]map[string]int64{} // sku -> user -> units
	for id, lines := range accepted {
		e, ok := ev[id]
		if !ok || e.p != f.parts.Of(lines[0].SKU) || len(e.items) != len(lines) {
			t.Fatalf("order %s (%v): event %+v", id, lines, e)
		}
		for i, l := range lines {
			if e.items[i].SKU != l.SKU || e.items[i].Quantity != l.Quantity {
				t.Fatalf("order %s line %d: %+v, want %+v", id, i, e.items[i], l)
			}
			taken[l.SKU] += int64(l.Quantity)
			if bought[l.SKU] == nil {
				bought[l.SKU] = map[string]int64{}
			}
			bought[l.SKU][buyer[id]] += int64(l.Quantity)
		}
	}
	ctx := context.Background()
	var sold int64
	for _, sku := range skus {
		a := f.available(t, sku)
		if a+taken[sku] != perSKU {
			t.Fatalf("%s: available %d + taken %d != %d", sku, a, taken[sku], perSKU)
		}
		sold += taken[sku]
		counts := f.rdb.HGetAll(ctx, f.stock.BuyersKey(sku)).Val()
		for _, u := range users {
			if fmt.Sprint(bought[sku][u]) != counts[u] && !(bought[sku][u] == 0 && counts[u] == "") {
				t.Fatalf("%s buyer %s: count %q, bought %d", sku, u, counts[u], bought[sku][u])
			}
		}
	}
	if sold < perSKU*int64(len(skus))/2 {
		t.Fatalf("only %d units sold: the race did not contend", sold)
	}
	f.noHolds(t)
}

// An Idempotency-Key on a cluster: a repeated buy-now gets the first
// order back and buys nothing more; the key for another request is
// idem_reused; a repeated checkout gets its first order back whatever the
// cart holds now; and a checkout refused under a key leaves a claim that a
// retry with another cart reruns under the same order id, whose home then
// holds none of its lines.
func TestIdempotencyKeyOnACluster(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	u := f.user(t)
	a, b, c := f.skuIn(t, "idem", 1, 10), f.skuIn(t, "idem", 5, 10), f.skuIn(t, "idem", 9, 10)
	buy := []order.Line{{SKU: a, Quantity: 2}}
	p1, err := f.svc.Place(ctx, u, buy, order.PlaceOptions{IdemKey: "k1"})
	if err != nil || p1.Replayed {
		t.Fatalf("first buy: %+v %v", p1, err)
	}
	p2, err := f.svc.Place(ctx, u, buy, order.PlaceOptions{IdemKey: "k1"})
	if err != nil || !p2.Replayed || p2.OrderID != p1.OrderID {
		t.Fatalf("repeat: %+v %v, want %s replayed", p2, err, p1.OrderID)
	}
	if _, err := f.svc.Place(ctx, u, []order.Line{{SKU: a, Quantity: 1}}, order.PlaceOptions{IdemKey: "k1"}); !errors.Is(err, order.ErrIdempotencyKeyReused) {
		t.Fatalf("another request with the key: %v", err)
	}
	if av := f.available(t, a); av != 8 {
		t.Fatalf("%s available %d, want 8", a, av)
	}

	lines := []order.Line{{SKU: b, Quantity: 1}, {SKU: c, Quantity: 1}, {SKU: a, Quantity: 1}}
	cart := f.cart(t, u, lines...)
	c1, err := f.svc.Place(ctx, u, lines, order.PlaceOptions{IdemKey: "k2", CartKey: cart})
	if err != nil || c1.Replayed {
		t.Fatalf("checkout: %+v %v", c1, err)
	}
	other := []order.Line{{SKU: c, Quantity: 3}}
	f.cart(t, u, other...)
	c2, err := f.svc.Place(ctx, u, other, order.PlaceOptions{IdemKey: "k2", CartKey: cart})
	if err != nil || !c2.Replayed || c2.OrderID != c1.OrderID {
		t.Fatalf("repeated checkout: %+v %v, want %s replayed", c2, err, c1.OrderID)
	}
	if r, ok, err := f.svc.Replay(ctx, u, "k2", nil); err != nil || !ok || r.OrderID != c1.OrderID {
		t.Fatalf("replay k2: %+v %v %v", r, ok, err)
	}

	// Refused (b has 9 units), the claim stays; Replay does not take it
	// for an order.
	f.rdb.Del(ctx, cart)
	big := []order.Line{{SKU: b, Quantity: 50}}
	if _, err := f.svc.Place(ctx, u, big, order.PlaceOptions{IdemKey: "k3", CartKey: f.cart(t, u, big...)}); !errors.Is(err, order.ErrOutOfStock) {
		t.Fatalf("big checkout: %v", err)
	}
	if _, ok, err := f.svc.Replay(ctx, u, "k3", nil); ok || err != nil {
		t.Fatalf("replay of a refused checkout: %v %v", ok, err)
	}
	f.rdb.Del(ctx, cart)
	small := []order.Line{{SKU: c, Quantity: 1}, {SKU: a, Quantity: 1}}
	c3, err := f.svc.Place(ctx, u, small, order.PlaceOptions{IdemKey: "k3", CartKey: f.cart(t, u, small...)})
	if err != nil || c3.Replayed {
		t.Fatalf("retried checkout: %+v %v", c3, err)
	}
	ev := f.events(t)
	if e := ev[c3.OrderID]; e.p != 5 || len(e.items) != 2 || e.items[0].SKU != c || e.items[1].SKU != a {
		t.Fatalf("retried checkout under the claimed id (home 5): %+v", e)
	}
	if len(ev) != 3 {
		t.Fatalf("%d orders, want 3", len(ev))
	}
	f.wantAvailable(t, "", map[string]int64{a: 6, b: 9, c: 8})
	f.noHolds(t)

	// That order, whose home holds none of its lines, is cancelled like any
	// other: the decision on its home, then each line back once.
	for range 2 {
		o, err := f.svc.Cancel(ctx, u, c3.OrderID)
		if err != nil || o.Status != order.StatusCancelled {
			t.Fatalf("cancel the order homed away from its lines: %+v %v", o, err)
		}
	}
	f.wantAvailable(t, "after the cancel", map[string]int64{a: 7, c: 9})
	tr, err := f.rdb.XRange(ctx, f.saga.keys.Stream(5), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	cancelled := 0
	for _, m := range tr {
		if m.Values["order_id"] == c3.OrderID && m.Values["status"] == order.StatusCancelled {
			cancelled++
		}
	}
	if cancelled != 1 {
		t.Fatalf("%d cancel transitions of %s in its home's stream, want 1", cancelled, c3.OrderID)
	}
}

// A checkout whose line on the third shard is refused leaves the other
// shards as they were (the hold taken on the second is given back), and
// the refusal is the one a single Redis gives: the most important kind
// over every line, here a per-user limit on the third shard ranked above
// the second's out-of-stock.
func TestCheckoutRefusedOnTheThirdShard(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	u := f.user(t)
	a, b := f.skuIn(t, "ref", 1, 10), f.skuIn(t, "ref", 5, 10)
	c := f.skuIn(t, "ref", 9, 1)
	lines := []order.Line{{SKU: a, Quantity: 2}, {SKU: b, Quantity: 3}, {SKU: c, Quantity: 2}}
	_, err := f.svc.Place(ctx, u, lines, order.PlaceOptions{CartKey: f.cart(t, u, lines...)})
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.CodeOutOfStock || fmt.Sprint(e.Extra["skus"]) != fmt.Sprint([]string{c}) {
		t.Fatalf("refusal %v, want out of stock for %s", err, c)
	}
	for sku, want := range map[string]int64{a: 10, b: 10, c: 1} {
		if av := f.available(t, sku); av != want {
			t.Fatalf("%s available %d, want %d", sku, av, want)
		}
		if n := f.rdb.HLen(ctx, f.stock.BuyersKey(sku)).Val(); n != 0 {
			t.Fatalf("%s counts %d buyers", sku, n)
		}
	}
	if ev := f.events(t); len(ev) != 0 {
		t.Fatalf("order events after a refusal: %v", ev)
	}
	f.noHolds(t)

	d := f.skuIn(t, "lim", 9, 10)
	f.rdb.HSet(ctx, f.stock.SaleKey(d), "limit", 1)
	lines = []order.Line{{SKU: a, Quantity: 1}, {SKU: b, Quantity: 11}, {SKU: d, Quantity: 2}}
	_, err = f.svc.Place(ctx, u, lines, order.PlaceOptions{})
	if !errors.As(err, &e) || e.Code != apperr.CodeLimitExceeded || fmt.Sprint(e.Extra["skus"]) != fmt.Sprint([]string{d}) {
		t.Fatalf("refusal %v, want the limit on %s", err, d)
	}
	if av := f.available(t, b) + f.available(t, a) + f.available(t, d); av != 30 {
		t.Fatalf("available %d after a refusal, want 30", av)
	}
	f.noHolds(t)
}

// A crash between a hold and the commit: the hold waits for its deadline,
// then the sweeper's repair (two sweepers at once) gives its units back
// once and leaves a tombstone that refuses the late commit and that no
// reader takes for an order. A crash after the commit, before the holds
// were dropped, is repaired the other way: the units stay the order's.
func TestSagaCrashRepairedBySweeper(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	h := f.holdOnFive(t, "crash", 4)
	u, lines, id, items := h.user, h.lines, h.id, h.items
	a, b := lines[0].SKU, lines[1].SKU
	held := []heldPart{{p: 5, items: items}}
	// Before the deadline the repair leaves the hold alone.
	sw := f.clusterSweeper()
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if av := f.available(t, b); av != 6 {
		t.Fatalf("%s available %d while held, want 6", b, av)
	}
	f.rdb.ZAdd(ctx, f.saga.keys.Holds(5), redis.Z{Score: 1, Member: id}) // the deadline passed
	var wg sync.WaitGroup
	for _, s := range []*sweeper.Sweeper{sw, f.clusterSweeper()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Sweep(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// A third settling of the same hold (a sweeper whose claim lease ran
	// out) finds nothing to give back.
	if err := NewRepair(f.rdb, f.stock, f.c.Prefix, f.log, RepairOptions{}).settleHold(ctx, 5, id); err != nil {
		t.Fatal(err)
	}
	if av := f.available(t, b); av != 10 {
		t.Fatalf("%s available %d after the repair, want 10", b, av)
	}
	if n := f.rdb.HLen(ctx, f.stock.BuyersKey(b)).Val(); n != 0 {
		t.Fatalf("%s still counts the buyer", b)
	}
	f.noHolds(t)
	if _, _, err := f.saga.commit(ctx, id, u, "", "attempt-1", 1, "commit", lines, f.saga.linePlaces(u, lines), held); !errors.Is(err, errSagaAborted) {
		t.Fatalf("late commit: %v, want aborted", err)
	}
	if av := f.available(t, a); av != 10 {
		t.Fatalf("%s available %d after the refused commit", a, av)
	}
	if _, err := f.svc.Get(ctx, u, id); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("get of the aborted order: %v", err)
	}
	if page, err := f.svc.List(ctx, u, 10, ""); err != nil || len(page.Items) != 0 {
		t.Fatalf("list: %+v %v", page, err)
	}
	if ev := f.events(t); len(ev) != 0 {
		t.Fatalf("events of an aborted order: %v", ev)
	}
	if n := f.rdb.ZCard(ctx, f.saga.keys.Settled(5)).Val(); n != 0 {
		t.Fatalf("the settled log names %d orders after an abort, want none", n)
	}
	// An entry past the settled log's retention, trimmed by the next drop.
	f.rdb.ZAdd(ctx, f.saga.keys.Settled(5), redis.Z{Score: 1, Member: "old"})

	// Committed, then the crash: the repair drops the hold, units stay sold.
	id2, _ := f.saga.NewOrderID("buyer", lines)
	items, _, err := f.saga.hold(ctx, f.group(5, u, lines[1:]), id2, u, "", "attempt-2", "take", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.saga.commit(ctx, id2, u, "", "attempt-2", 1, "commit", lines, f.saga.linePlaces(u, lines), []heldPart{{p: 5, items: items}}); err != nil {
		t.Fatal(err)
	}
	f.rdb.ZAdd(ctx, f.saga.keys.Holds(5), redis.Z{Score: 1, Member: id2})
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	f.noHolds(t)
	if av, bv := f.available(t, a), f.available(t, b); av != 9 || bv != 6 {
		t.Fatalf("after repairing a committed order: available %d and %d, want 9 and 6", av, bv)
	}
	if o, err := f.svc.Get(ctx, u, id2); err != nil || o.Status != order.StatusPending || len(o.Items) != 2 {
		t.Fatalf("committed order: %+v %v", o, err)
	}
	// The drop moved the hold into the settled log, in the same step: the
	// audit's record that these units are id2's.
	log := f.rdb.ZRange(ctx, f.saga.keys.Settled(5), 0, -1).Val()
	var entry struct {
		OrderID string               `json:"order_id"`
		User    string               `json:"user"`
		Items   []order.ReservedItem `json:"items"`
	}
	if len(log) != 1 || json.Unmarshal([]byte(log[0]), &entry) != nil || entry.OrderID != id2 || entry.User != u ||
		len(entry.Items) != 1 || entry.Items[0] != items[0] {
		t.Fatalf("settled log %v, want one entry of %s with %+v", log, id2, items)
	}
	if ttl := f.rdb.PTTL(ctx, f.saga.keys.Settled(5)).Val(); ttl <= 0 || ttl > ledger.SettledRetention {
		t.Fatalf("settled log expires in %s, want within %s", ttl, ledger.SettledRetention)
	}
}

// Repeats of one Idempotency-Key racing on a cluster, a buy-now's and a
// cross-shard checkout's: one order each, every accepted answer names it,
// and its units are taken once (a run that found another holding a
// partition is told to retry: 503).
func TestIdempotencyKeyRaceOnACluster(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	u := f.user(t)
	a, b, c := f.skuIn(t, "ir", 2, 50), f.skuIn(t, "ir", 6, 50), f.skuIn(t, "ir", 10, 50)
	for _, tc := range []struct {
		key   string
		lines []order.Line
	}{
		{"buy", []order.Line{{SKU: a, Quantity: 1}}},
		{"checkout", []order.Line{{SKU: a, Quantity: 2}, {SKU: b, Quantity: 1}, {SKU: c, Quantity: 3}}},
	} {
		var mu sync.Mutex
		ids := map[string]int{}
		place := func() {
			p, err := f.svc.Place(context.Background(), u, tc.lines, order.PlaceOptions{IdemKey: tc.key})
			var e *apperr.Error
			switch {
			case errors.As(err, &e) && e.Code == apperr.CodeUnavailable:
			case err != nil:
				t.Error(err)
			default:
				mu.Lock()
				ids[p.OrderID]++
				mu.Unlock()
			}
		}
		ordertesting.Together(slices.Repeat([]func(){place}, 12)...)
		if len(ids) != 1 {
			t.Fatalf("%s: answers name %d orders: %v", tc.key, len(ids), ids)
		}
	}
	ev := f.events(t)
	if len(ev) != 2 {
		t.Fatalf("%d orders, want 2", len(ev))
	}
	f.wantAvailable(t, "", map[string]int64{a: 47, b: 49, c: 47})
	f.noHolds(t)
}

// A repeat of an Idempotency-Key whose first run committed while the
// repeat was on its way (it found no status when it looked, so it runs
// the saga again under the same id) answers that order, not the refusal
// its own holds then meet: with a limit of one per buyer the repeat's hold
// is refused (the first run counted the buyer), and with the last unit
// gone it is out of stock. Nothing is taken twice.
func TestRepeatRacingItsCommittedRunAnswersTheOrder(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	u := f.user(t)
	home, limited := f.skuIn(t, "rep", 2, 10), "rep-limited"
	for i := 0; ; i++ { // a SKU of partition 6 with a limit of 1
		if limited = fmt.Sprintf("rep-limited-%d", i); f.parts.Of(limited) == 6 {
			f.sale(t, limited, 10, 1, 100)
			break
		}
	}
	last := f.skuIn(t, "rep-last", 9, 1)
	for _, lines := range [][]order.Line{
		{{SKU: home, Quantity: 1}, {SKU: limited, Quantity: 1}},
		{{SKU: home, Quantity: 1}, {SKU: last, Quantity: 1}},
	} {
		cart := f.cart(t, u, lines...)
		first, err := f.svc.Place(ctx, u, lines, order.PlaceOptions{IdemKey: "k-" + lines[1].SKU, CartKey: cart})
		if err != nil || first.Replayed {
			t.Fatalf("first checkout of %v: %+v %v", lines, first, err)
		}
		before := map[string]int64{home: f.available(t, home), lines[1].SKU: f.available(t, lines[1].SKU)}
		// What the repeat does once it has found the claim and no status.
		again, err := f.saga.saga(ctx, first.OrderID, u, "", lines)
		if err != nil || !again.Replayed || again.OrderID != first.OrderID {
			t.Fatalf("the repeat of %s: %+v %v, want the same order replayed", first.OrderID, again, err)
		}
		for sku, want := range before {
			if got := f.available(t, sku); got != want {
				t.Fatalf("after the repeat %s available %d, want %d", sku, got, want)
			}
		}
	}
	f.noHolds(t)
}

// A failover that lost a committed order's status (its hold still there:
// the drop after the commit never ran) and recover's restored status
// (from PostgreSQL: no attempt): the repair keeps the units the order's,
// and a tombstone written by a repair that swept before recover gives way
// to the restored status.
func TestRepairKeepsTheUnitsOfARestoredOrder(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	u, lines := f.user(t), f.onOneAndFive(t, "rest", "rest", 4)
	b := lines[1].SKU
	for _, tombstoned := range []bool{false, true} {
		id := f.orderID(t, lines)
		before := f.available(t, b)
		items := f.take(t, 5, id, u, "attempt-1", lines[1:])
		res := f.commitOf(t, id, u, "attempt-1", lines, []heldPart{{p: 5, items: items}})
		f.rdb.Del(ctx, f.saga.keys.Status(id)) // the failover
		if tombstoned {
			if _, err := abortScript.Run(ctx, f.rdb, []string{f.saga.keys.Status(id)}, time.Hour.Milliseconds()).Result(); err != nil {
				t.Fatal(err)
			}
		}
		f.restore(t, id, u, res)
		f.rdb.ZAdd(ctx, f.saga.keys.Holds(5), redis.Z{Score: 1, Member: id}) // the deadline passed
		if _, err := f.clusterSweeper().Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if got := f.available(t, b); got != before-4 {
			t.Fatalf("tombstone %v: %s available %d after the repair, want %d (the order keeps its units)", tombstoned, b, got, before-4)
		}
		if o, err := f.svc.Get(ctx, u, id); err != nil || o.Status != order.StatusConfirmed {
			t.Fatalf("tombstone %v: the restored order: %+v %v", tombstoned, o, err)
		}
	}
	if n := f.rdb.ZCard(ctx, f.saga.keys.Holds(5)).Val(); n != 0 {
		t.Fatalf("%d holds left", n)
	}
}

// A failover that lost a committed and written order's status while its
// hold was still there (the drop after the commit never ran), with the
// repair sweeping before recover: it finds no status, asks PostgreSQL,
// which has the order, and drops the hold (the units stay the order's,
// the settled log names it) instead of tombstoning the order and giving
// its units back.
func TestRepairAsksPostgreSQLBeforeTheTombstone(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	h := f.holdOnFive(t, "lost", 4)
	u, lines, id, items := h.user, h.lines, h.id, h.items
	b := lines[1].SKU
	f.commitOf(t, id, u, "attempt-1", lines, []heldPart{{p: 5, items: items}})
	w := f.writer()
	running := start(w)
	for deadline := time.Now().Add(30 * time.Second); f.count(t, `SELECT count(*) FROM orders WHERE id = $1`, id) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the order was not written within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	running.Stop(t)
	f.rdb.Del(ctx, f.saga.keys.Status(id)) // the failover
	f.rdb.ZAdd(ctx, f.saga.keys.Holds(5), redis.Z{Score: 1, Member: id})
	sw := f.sweeper(RepairOptions{Persisted: ledger.PersistedIn(f.db.Pool)})
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.available(t, b); got != 6 {
		t.Fatalf("%s available %d after the repair, want 6 (the written order keeps its units)", b, got)
	}
	if st := f.rdb.HGet(ctx, f.saga.keys.Status(id), "status").Val(); st != order.StatusConfirmed {
		t.Fatalf("status %q after the repair, want the order's, back from PostgreSQL", st)
	}
	if log := f.rdb.ZRange(ctx, f.saga.keys.Settled(5), 0, -1).Val(); len(log) != 1 || !strings.Contains(log[0], id) {
		t.Fatalf("settled log %v, want the order's entry", log)
	}
	f.noHolds(t)
}

// A repeat whose first run the repair has aborted while a hold of that
// run is still on another partition (the repair settles each partition's
// holds as it reaches them) is told to retry (503): a fresh order run then
// could be refused for units no order keeps. Once the hold is given back,
// the repeat places a fresh order.
func TestRepeatWaitsForTheAbortedOrdersHolds(t *testing.T) {
	t.Parallel()
	f := newClusterFixture(t)
	ctx := context.Background()
	// The first run: b held on partition 5, the key claimed, the process
	// gone; the repair tombstoned the order on its home.
	h := f.holdOnFive(t, "wait", 1)
	u, lines, id := h.user, h.lines, h.id
	if _, _, err := f.saga.claim(ctx, f.saga.keys.Idem(u, "k"), f.saga.Fingerprint(lines, false), id, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := abortScript.Run(ctx, f.rdb, []string{f.saga.keys.Status(id)}, time.Hour.Milliseconds()).Result(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Place(ctx, u, lines, order.PlaceOptions{IdemKey: "k"}); !errors.Is(err, errSagaBusy) {
		t.Fatalf("a repeat while the aborted order still holds partition 5: %v, want %v", err, errSagaBusy)
	}
	if _, err := f.saga.unhold(ctx, 5, id, u, "attempt-1", "release", h.items); err != nil {
		t.Fatal(err)
	}
	placed, err := f.svc.Place(ctx, u, lines, order.PlaceOptions{IdemKey: "k"})
	if err != nil || placed.Replayed || placed.OrderID == id {
		t.Fatalf("the repeat once the hold was given back: %+v %v, want a fresh order", placed, err)
	}
	f.noHolds(t)
}
