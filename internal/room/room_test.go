package room_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/room"
	"github.com/shop-oss/shop/internal/room/roomrule"
	"github.com/shop-oss/shop/internal/testenv"
)

// fixture is a room service on a test's own PostgreSQL and Redis.
type fixture struct {
	rooms *room.Service
	sales *inventory.Sales
	stock *inventory.Stock
	cat   *inventory.Catalog
	r     *testenv.Redis
	db    *testenv.Database
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, testenv.NewRedis(t))
}

// newFixtureOn is newFixture on r (e.g. a private redis-server's).
func newFixtureOn(t testing.TB, r *testenv.Redis) *fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	c := cache.New(r.Client, cache.Options{Prefix: r.Prefix + "cache:", TTL: time.Minute}, prometheus.NewRegistry())
	stock := inventory.NewStock(r.Client, r.Prefix)
	log := slog.New(slog.DiscardHandler)
	rooms := room.New(db.Pool, r.Client, stock, r.Prefix, log, room.Options{})
	return &fixture{
		rooms: rooms, sales: inventory.NewSalesWithRooms(db.Pool, stock, rooms), stock: stock, r: r, db: db,
		cat: inventory.NewCatalogOn(db.Pool, stock, c, log, inventory.CatalogOptions{}),
	}
}

// open creates sku and opens a roomed round of quantity units.
func (f *fixture) open(t testing.TB, sku string, quantity int, starts time.Time, room inventory.RoomSettings) inventory.StockReport {
	t.Helper()
	ctx := context.Background()
	if _, err := f.cat.Create(ctx, sku, inventory.ProductInput{Name: sku, Category: "c", PriceCents: 100}); err != nil &&
		!errors.Is(err, inventory.ErrSKUTaken) {
		t.Fatal(err)
	}
	rep, err := f.sales.Open(ctx, sku, inventory.Seed{Quantity: quantity, PerUserLimit: 1, StartsAt: starts, Room: &room})
	if err != nil {
		t.Fatalf("open %s: %v", sku, err)
	}
	return rep
}

func users(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uuid.NewString()
	}
	return out
}

// joinAll joins every user at once (released together) and returns the
// tickets in users' order.
func (f *fixture) joinAll(t *testing.T, sku string, us []string) []room.Ticket {
	t.Helper()
	tickets := make([]room.Ticket, len(us))
	errs := make([]error, len(us))
	created := make([]bool, len(us))
	var start, done sync.WaitGroup
	start.Add(1)
	for i, u := range us {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			tickets[i], created[i], errs[i] = f.rooms.Join(context.Background(), sku, u, nil, nil)
		}()
	}
	start.Done()
	done.Wait()
	for i := range us {
		if errs[i] != nil || !created[i] {
			t.Fatalf("join %d: created %v, %v", i, created[i], errs[i])
		}
	}
	return tickets
}

func TestFiveHundredJoinAtOnceEachOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.open(t, "drop", 10, time.Time{}, inventory.RoomSettings{AdmitPerSecond: 1, PassTTL: time.Minute})
	us := users(500)
	tickets := f.joinAll(t, "drop", us)
	// Every position 1..500 once: a permutation.
	var got []int64
	ids := map[string]bool{}
	for _, tk := range tickets {
		if tk.Position == nil || tk.State != room.StateWaiting {
			t.Fatalf("ticket %+v", tk)
		}
		got = append(got, *tk.Position)
		ids[tk.EntryID] = true
	}
	slices.Sort(got)
	for i, p := range got {
		if p != int64(i+1) {
			t.Fatalf("positions are not 1..500: %v", got)
		}
	}
	if len(ids) != 500 {
		t.Fatalf("%d distinct entry ids, want 500", len(ids))
	}
	// A repeat answers the same ticket, makes nothing.
	again, created, err := f.rooms.Join(context.Background(), "drop", us[7], nil, nil)
	if err != nil || created || again.EntryID != tickets[7].EntryID || *again.Position != *tickets[7].Position {
		t.Fatalf("repeat join: %+v created %v %v; first %+v", again, created, err, tickets[7])
	}
	w, a, err := f.rooms.Counters(context.Background(), "drop", 1)
	if err != nil || w != 500 || a != 0 {
		t.Fatalf("counters: waiting %d admitted %d %v", w, a, err)
	}
}

func TestEarlyJoinersAreShuffledBySeed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// Long enough for the 60 joins below on a loaded machine.
	starts := time.Now().Add(3 * time.Second)
	f.open(t, "hype", 100, starts, inventory.RoomSettings{AdmitPerSecond: 1000, PassTTL: time.Minute})
	us := users(60)
	tickets := f.joinAll(t, "hype", us)
	for _, tk := range tickets {
		if tk.Position != nil {
			t.Fatalf("a position before the shuffle: %+v", tk)
		}
	}
	fair, err := f.rooms.Fairness(ctx, "hype")
	if err != nil || fair.Seed != nil || fair.EarlyOrderSHA256 != nil || fair.EarlyEntries != 60 {
		t.Fatalf("fairness before the shuffle: %+v %v", fair, err)
	}
	time.Sleep(time.Until(starts) + 1100*time.Millisecond)
	late := users(3)
	for _, u := range late {
		if _, _, err := f.rooms.Join(ctx, "hype", u, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	fair, err = f.rooms.Fairness(ctx, "hype")
	if err != nil || fair.Seed == nil || fair.EarlyOrderSHA256 == nil {
		t.Fatalf("fairness after the shuffle: %+v %v", fair, err)
	}
	if inventory.SeedSHA(*fair.Seed) != fair.SeedSHA256 {
		t.Fatal("the seed does not hash to the committed seed_sha256")
	}
	// Recompute the early order from the entry ids and the seed alone.
	ids := make([]string, len(tickets))
	for i, tk := range tickets {
		ids[i] = tk.EntryID
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := roomrule.OrderKey(*fair.Seed, ids[i]), roomrule.OrderKey(*fair.Seed, ids[j])
		return bytes.Compare(a[:], b[:]) < 0
	})
	if roomrule.EarlyOrderSHA(ids) != *fair.EarlyOrderSHA256 {
		t.Fatal("early_order_sha256 is not the digest of the seed's order")
	}
	page, err := f.rooms.EntryList(ctx, "hype", 0, 1000)
	if err != nil || len(page.Items) != 63 {
		t.Fatalf("entries: %d %v", len(page.Items), err)
	}
	for i, e := range page.Items[:60] {
		if e.EntryID != ids[i] || !e.Early || e.Position == nil || *e.Position != int64(i+1) {
			t.Fatalf("entry %d: %+v, want id %s", i, e, ids[i])
		}
		tk, err := f.rooms.TicketOf(ctx, "hype", e.UserID, nil)
		if err != nil || tk.Position == nil {
			t.Fatalf("ticket of %s: %+v %v", e.UserID, tk, err)
		}
	}
	for i, e := range page.Items[60:] {
		if e.Early || e.UserID != late[i] {
			t.Fatalf("late entry %d: %+v, want user %s", i, e, late[i])
		}
	}
}

func TestTwoAdmittersHoldTheRate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const rate = 40
	f.open(t, "rate", 1000, time.Time{}, inventory.RoomSettings{AdmitPerSecond: rate, PassTTL: time.Minute})
	us := users(300)
	f.joinAll(t, "rate", us)
	// A second service is a second instance.
	other := room.New(f.db.Pool, f.r.Client, f.stock, f.r.Prefix, slog.New(slog.DiscardHandler), room.Options{})
	begin := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := int64(0)
	for _, svc := range []*room.Service{f.rooms, other, f.rooms, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(begin) < 2*time.Second {
				tr, err := svc.AdmitTurn(ctx, "rate")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += tr.Admitted
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin).Seconds()
	_, admitted, err := f.rooms.Counters(ctx, "rate", 1)
	if err != nil || admitted != total {
		t.Fatalf("admitted %d, turns said %d (%v)", admitted, total, err)
	}
	if limit := int64(rate * (elapsed + 1)); admitted > limit || admitted < int64(rate*elapsed/2) {
		t.Fatalf("admitted %d in %.2fs at %d/s", admitted, elapsed, rate)
	}
	// Admitted in order: exactly positions 1..admitted hold passes.
	page, err := f.rooms.EntryList(ctx, "rate", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	passes, err := f.r.Client.HGetAll(ctx, f.rooms.Keys().Passes("rate")).Result()
	if err != nil || int64(len(passes)) != admitted {
		t.Fatalf("%d passes for %d admitted (%v)", len(passes), admitted, err)
	}
	for _, e := range page.Items {
		_, hasPass := passes[e.UserID]
		if e.Position == nil || (*e.Position <= admitted) != hasPass || (e.AdmittedAt != nil) != hasPass {
			t.Fatalf("entry %+v: pass %v with %d admitted", e, hasPass, admitted)
		}
	}
	tk, err := f.rooms.TicketOf(ctx, "rate", page.Items[0].UserID, nil)
	if err != nil || tk.State != room.StateAdmitted || tk.Pass == nil || *tk.Pass == "" || tk.PassExpiresAt == nil {
		t.Fatalf("first ticket: %+v %v", tk, err)
	}
	if passes[page.Items[0].UserID][:2] != "1 " || len(*tk.Pass) != 32 {
		t.Fatalf("pass record %q, ticket pass %q", passes[page.Items[0].UserID], *tk.Pass)
	}
}

func TestSoldOutPausesAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.open(t, "none", 0, time.Time{}, inventory.RoomSettings{AdmitPerSecond: 1000, PassTTL: time.Minute})
	us := users(5)
	f.joinAll(t, "none", us)
	time.Sleep(50 * time.Millisecond)
	tr, err := f.rooms.AdmitTurn(ctx, "none")
	if err != nil || tr.Status != "sold_out" || tr.Total != 0 {
		t.Fatalf("turn: %+v %v", tr, err)
	}
	tk, err := f.rooms.TicketOf(ctx, "none", us[0], nil)
	if err != nil || tk.State != room.StateSoldOut {
		t.Fatalf("ticket: %+v %v", tk, err)
	}
}

func TestChallengeGatesTheJoin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.open(t, "pow", 10, time.Time{}, inventory.RoomSettings{AdmitPerSecond: 10, PassTTL: time.Minute, ChallengeBits: 8})
	u, other := uuid.NewString(), uuid.NewString()
	join := func(user string, p *room.Proof) error {
		_, _, err := f.rooms.Join(ctx, "pow", user, p, nil)
		return err
	}
	if err := join(u, nil); !errors.Is(err, room.ErrChallengeFailed) {
		t.Fatalf("no challenge: %v", err)
	}
	c, err := f.rooms.IssueChallenge(ctx, "pow", u)
	if err != nil || c.Bits != 8 || len(c.Challenge) != 32 {
		t.Fatalf("challenge %+v %v", c, err)
	}
	good := roomrule.Solve(c.Challenge, 8)
	bad := "x"
	for roomrule.Solves(c.Challenge, bad, 8) {
		bad += "x"
	}
	// A wrong answer uses the challenge up: the right one then fails.
	if err := join(u, &room.Proof{Challenge: c.Challenge, Nonce: bad}); !errors.Is(err, room.ErrChallengeFailed) {
		t.Fatalf("wrong nonce: %v", err)
	}
	if err := join(u, &room.Proof{Challenge: c.Challenge, Nonce: good}); !errors.Is(err, room.ErrChallengeFailed) {
		t.Fatalf("a presented challenge again: %v", err)
	}
	// Another shopper's challenge fails, and is used up.
	c2, _ := f.rooms.IssueChallenge(ctx, "pow", u)
	if err := join(other, &room.Proof{Challenge: c2.Challenge, Nonce: roomrule.Solve(c2.Challenge, 8)}); !errors.Is(err, room.ErrChallengeFailed) {
		t.Fatalf("another's challenge: %v", err)
	}
	c3, _ := f.rooms.IssueChallenge(ctx, "pow", u)
	if err := join(u, &room.Proof{Challenge: c3.Challenge, Nonce: roomrule.Solve(c3.Challenge, 8)}); err != nil {
		t.Fatalf("the right answer: %v", err)
	}
	// In the room: the ticket without a challenge.
	if err := join(u, nil); err != nil {
		t.Fatalf("repeat without a challenge: %v", err)
	}
	if w, _, _ := f.rooms.Counters(ctx, "pow", 1); w != 1 {
		t.Fatalf("%d entries, want 1", w)
	}
}

func TestRecordedRoomOutlivesRedis(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rep := f.open(t, "rec", 100, time.Time{}, inventory.RoomSettings{AdmitPerSecond: 1000, PassTTL: time.Minute})
	us := users(20)
	f.joinAll(t, "rec", us)
	time.Sleep(20 * time.Millisecond)
	if _, err := f.rooms.AdmitTurn(ctx, "rec"); err != nil {
		t.Fatal(err)
	}
	before, err := f.rooms.EntryList(ctx, "rec", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	fairBefore, err := f.rooms.Fairness(ctx, "rec")
	if err != nil {
		t.Fatal(err)
	}
	// A new round without a room replaces it; the old one is recorded.
	if _, err := f.sales.Open(ctx, "rec", inventory.Seed{Quantity: 5, PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second changes nothing
		if err := f.rooms.Record(ctx, "rec", *rep.RoundID); err != nil {
			t.Fatal(err)
		}
	}
	after, err := f.rooms.EntryList(ctx, "rec", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != 20 || !slices.EqualFunc(before.Items, after.Items, func(a, b room.Entry) bool {
		return a.EntryID == b.EntryID && a.Position != nil && b.Position != nil && *a.Position == *b.Position && a.UserID == b.UserID &&
			a.JoinedAt.Equal(b.JoinedAt) && (a.AdmittedAt == nil) == (b.AdmittedAt == nil)
	}) {
		t.Fatalf("recorded entries differ:\n%+v\n%+v", before.Items, after.Items)
	}
	fair, err := f.rooms.Fairness(ctx, "rec")
	if err != nil || fair.Seed == nil || *fair.EarlyOrderSHA256 != *fairBefore.EarlyOrderSHA256 || fair.RoundID != *rep.RoundID ||
		fair.Live || !fairBefore.Live {
		t.Fatalf("recorded fairness %+v %v, live was %+v", fair, err, fairBefore)
	}
	n, err := f.r.Client.Exists(ctx, f.rooms.Keys().Late("rec", *rep.RoundID), f.rooms.Keys().Early("rec", *rep.RoundID),
		f.rooms.Keys().Admissions("rec", *rep.RoundID)).Result()
	if err != nil || n != 0 {
		t.Fatalf("%d room keys left in Redis (%v)", n, err)
	}
	// The counters come from the tombstone for a day, then from the record.
	w0, a0, err := f.rooms.Counters(ctx, "rec", *rep.RoundID)
	if err != nil || w0+a0 != 20 || a0 == 0 {
		t.Fatalf("recorded counters: waiting %d admitted %d %v", w0, a0, err)
	}
	if err := f.r.Client.Del(ctx, f.rooms.Keys().State("rec", *rep.RoundID)).Err(); err != nil {
		t.Fatal(err)
	}
	if w, a, err := f.rooms.Counters(ctx, "rec", *rep.RoundID); err != nil || w != w0 || a != a0 {
		t.Fatalf("counters once the tombstone is gone: waiting %d admitted %d %v, want %d %d", w, a, err, w0, a0)
	}
	// The new round has no room: joining it is a 404 of its own.
	if _, _, err := f.rooms.Join(ctx, "rec", us[0], nil, nil); !errors.Is(err, room.ErrNoRoom) {
		t.Fatalf("join a round without a room: %v", err)
	}
}

func TestAuditFindsWhatBrokeARoom(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rep := f.open(t, "aud", 100, time.Time{}, inventory.RoomSettings{AdmitPerSecond: 5, PassTTL: time.Minute})
	round := *rep.RoundID
	us := f.joinAll(t, "aud", users(12))
	_ = us
	time.Sleep(300 * time.Millisecond)
	if _, err := f.rooms.AdmitTurn(ctx, "aud"); err != nil {
		t.Fatal(err)
	}
	page, err := f.rooms.EntryList(ctx, "aud", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	admitted, waiting := page.Items[0].UserID, page.Items[11].UserID
	buyers := f.stock.BuyersKey("aud")
	f.r.Client.HIncrBy(ctx, buyers, admitted, 1) // a buyer with a pass
	if found, err := f.rooms.Audit(ctx); err != nil || len(found) != 0 {
		t.Fatalf("a healthy room: %+v %v", found, err)
	}
	// A buyer who was never admitted: a purchase without a pass.
	f.r.Client.HIncrBy(ctx, buyers, waiting, 1)
	// An admission log that admitted 40 in one second at 5/s.
	f.r.Client.RPush(ctx, f.rooms.Keys().Admissions("aud", round), fmt.Sprintf("40 %d", time.Now().UnixMilli()))
	found, err := f.rooms.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]room.Finding{}
	for _, x := range found {
		kinds[x.Kind] = x
	}
	if p := kinds["room_pass"]; len(p.Users) != 1 || p.Users[0] != waiting {
		t.Errorf("room_pass: %+v", p)
	}
	if _, ok := kinds["room_rate"]; !ok {
		t.Errorf("no room_rate in %+v", found)
	}
	f.r.Client.RPop(ctx, f.rooms.Keys().Admissions("aud", round))
	f.r.Client.HDel(ctx, buyers, waiting)

	// Recorded: a swap of two early positions in PostgreSQL breaks the order.
	starts := time.Now().Add(time.Second)
	rep2 := f.open(t, "aud2", 10, starts, inventory.RoomSettings{AdmitPerSecond: 5, PassTTL: time.Minute})
	f.joinAll(t, "aud2", users(5))
	time.Sleep(time.Until(starts) + 1100*time.Millisecond)
	if _, err := f.sales.Open(ctx, "aud2", inventory.Seed{Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.rooms.Record(ctx, "aud2", *rep2.RoundID); err != nil {
		t.Fatal(err)
	}
	if found, err := f.rooms.Audit(ctx); err != nil || len(found) != 0 {
		t.Fatalf("recorded, untouched: %+v %v", found, err)
	}
	for _, swap := range [][2]int{{1, 1000}, {2, 1}, {1000, 2}} {
		_, err = f.db.Pool.Exec(ctx, `UPDATE queue_entries SET position = $3 WHERE round_id = $1 AND position = $2`,
			*rep2.RoundID, swap[0], swap[1])
		if err != nil {
			t.Fatal(err)
		}
	}
	found, err = f.rooms.Audit(ctx)
	if err != nil || len(found) != 1 || found[0].Kind != "room_order" || found[0].RoundID != *rep2.RoundID {
		t.Fatalf("swapped early positions: %+v %v", found, err)
	}
}

// Once the round has ended no join can use a challenge, so none is
// issued: the join's own answer, sale_not_active.
func TestNoChallengeAfterTheRoundEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.cat.Create(ctx, "over", inventory.ProductInput{Name: "over", Category: "c", PriceCents: 100}); err != nil {
		t.Fatal(err)
	}
	ends := time.Now().Add(1500 * time.Millisecond)
	if _, err := f.sales.Open(ctx, "over", inventory.Seed{Quantity: 5, PerUserLimit: 1, EndsAt: ends,
		Room: &inventory.RoomSettings{AdmitPerSecond: 10, PassTTL: time.Minute, ChallengeBits: 8}}); err != nil {
		t.Fatal(err)
	}
	u := uuid.NewString()
	if _, err := f.rooms.IssueChallenge(ctx, "over", u); err != nil {
		t.Fatalf("before the end: %v", err)
	}
	time.Sleep(time.Until(ends) + 100*time.Millisecond)
	if c, err := f.rooms.IssueChallenge(ctx, "over", u); !errors.Is(err, room.ErrSaleNotActive) {
		t.Fatalf("after the end: %+v %v, want ErrSaleNotActive", c, err)
	}
}

// An honest room's audit finds nothing, however its turns went: a rate
// lowered after admissions is bounded by the highest rate the room has
// had, and a room whose round has no starts_at is audited second by
// second too, not as if every admission came in one second.
func TestAuditOfHonestRooms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sku           string
		rate, joiners int
		turns         func(ctx context.Context, t *testing.T, f *fixture, sku string)
	}{
		{"slowed", 1000, 300, func(ctx context.Context, t *testing.T, f *fixture, sku string) {
			time.Sleep(400 * time.Millisecond)
			if tr, err := f.rooms.AdmitTurn(ctx, sku); err != nil || tr.Total < 100 {
				t.Fatalf("turn: %+v %v", tr, err)
			}
			if err := f.sales.SetAdmitRate(ctx, sku, 1); err != nil {
				t.Fatal(err)
			}
		}},
		{"anytime", 20, 100, func(ctx context.Context, t *testing.T, f *fixture, sku string) {
			for range 6 {
				time.Sleep(500 * time.Millisecond)
				if _, err := f.rooms.AdmitTurn(ctx, sku); err != nil {
					t.Fatal(err)
				}
			}
			if w, a, err := f.rooms.Counters(ctx, sku, 1); err != nil || a < 50 {
				t.Fatalf("admitted %d (waiting %d) %v", a, w, err)
			}
		}},
	} {
		t.Run(tc.sku, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			f.open(t, tc.sku, 500, time.Time{}, inventory.RoomSettings{AdmitPerSecond: tc.rate, PassTTL: time.Minute})
			f.joinAll(t, tc.sku, users(tc.joiners))
			tc.turns(ctx, t, f, tc.sku)
			if found, err := f.rooms.Audit(ctx); err != nil || len(found) != 0 {
				t.Fatalf("audit: %+v %v", found, err)
			}
		})
	}
}

// A challenge belongs to its shopper and its round: one issued before the
// SKU's round was replaced is refused, and makes no entry, though its
// nonce answers the new round's difficulty; and a round without a room
// issues none, on an instance that read the roomed round a moment before
// as on the one that opened the new round.
func TestChallengeBelongsToItsRound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// A second service is a second instance.
	other := room.New(f.db.Pool, f.r.Client, f.stock, f.r.Prefix, slog.New(slog.DiscardHandler), room.Options{})
	u := uuid.NewString()
	f.open(t, "turn", 10, time.Time{}, inventory.RoomSettings{AdmitPerSecond: 10, PassTTL: time.Minute, ChallengeBits: 8})
	old, err := f.rooms.IssueChallenge(ctx, "turn", u)
	if err != nil {
		t.Fatal(err)
	}
	rep := f.open(t, "turn", 10, time.Time{}, inventory.RoomSettings{AdmitPerSecond: 10, PassTTL: time.Minute, ChallengeBits: 4})
	p := &room.Proof{Challenge: old.Challenge, Nonce: roomrule.Solve(old.Challenge, 8)} // 8 bits answer 4 too
	if tk, _, err := f.rooms.Join(ctx, "turn", u, p, nil); !errors.Is(err, room.ErrChallengeFailed) {
		t.Errorf("a challenge of round %d joined round %d: %+v %v", *rep.RoundID-1, *rep.RoundID, tk, err)
	}
	if w, a, err := f.rooms.Counters(ctx, "turn", *rep.RoundID); err != nil || w+a != 0 {
		t.Errorf("%d entries after a refused join (%v)", w+a, err)
	}

	// Both instances read the roomed round, then it is replaced by one
	// without a room.
	for _, svc := range []*room.Service{f.rooms, other} {
		if _, err := svc.IssueChallenge(ctx, "turn", u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.sales.Open(ctx, "turn", inventory.Seed{Quantity: 5, PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	for i, svc := range []*room.Service{f.rooms, other} {
		if c, err := svc.IssueChallenge(ctx, "turn", u); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("instance %d: a round without a room issued %+v %v, want ErrNoRoom", i, c, err)
		}
	}
}

// Before the shuffle the entry list is in order of joining, without
// positions (the early set's order is the secret one), and pages by
// cursor; a room whose list of joins misses entries (joined through an
// older join.lua) is sorted by join time instead.
func TestEntryListBeforeTheShuffle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rep := f.open(t, "soon", 10, time.Now().Add(time.Hour), inventory.RoomSettings{AdmitPerSecond: 10, PassTTL: time.Minute})
	us := users(7)
	for _, u := range us {
		if _, _, err := f.rooms.Join(ctx, "soon", u, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []room.Entry {
		var all []room.Entry
		for from, pages := int64(0), 0; ; pages++ {
			page, err := f.rooms.EntryList(ctx, "soon", from, 3)
			if err != nil || !page.Joining || pages > 3 {
				t.Fatalf("page %d from %d: %+v %v", pages, from, page, err)
			}
			all = append(all, page.Items...)
			if page.NextCursor == nil {
				return all
			}
			if want := fmt.Sprintf("j%d.%d", *rep.RoundID, len(all)); *page.NextCursor != want {
				t.Fatalf("cursor %q, want %q", *page.NextCursor, want)
			}
			from = int64(len(all))
		}
	}
	check := func(es []room.Entry, want []string) {
		t.Helper()
		got := make([]string, len(es))
		for i, e := range es {
			if e.Position != nil || e.AdmittedAt != nil || !e.Early {
				t.Fatalf("entry %d: %+v, want no position and not admitted", i, e)
			}
			got[i] = e.UserID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("entries of users %v, want %v", got, want)
		}
	}
	listed := read()
	check(listed, us)

	if err := f.r.Client.Del(ctx, f.rooms.Keys().Joined("soon", *rep.RoundID)).Err(); err != nil {
		t.Fatal(err)
	}
	sorted := slices.Clone(listed)
	slices.SortStableFunc(sorted, func(a, b room.Entry) int {
		if c := a.JoinedAt.Compare(b.JoinedAt); c != 0 {
			return c
		}
		return strings.Compare(a.UserID, b.UserID)
	})
	want := make([]string, len(sorted))
	for i, e := range sorted {
		want[i] = e.UserID
	}
	check(read(), want)
}
