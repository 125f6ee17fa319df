package writer

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ordertesting"
	"github.com/shop-oss/shop/internal/testenv"
)

func TestWriterPersistsAndConfirms(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	round := f.Sale(t, "sku-a", 10, 0, 300)
	u := f.User(t)
	p1 := f.place(t, u, "sku-a", 2)
	p2 := f.place(t, u, "sku-a", 1)
	if o, err := f.svc.Get(context.Background(), u, p1.OrderID); err != nil || o.Status != order.StatusPending || o.TotalCents != 600 {
		t.Fatalf("before the writer: %+v %v", o, err)
	}
	f.drain(t, "w1", Options{})
	f.wantWritten(t, round, 2, 3)
	for _, p := range []order.Placed{p1, p2} {
		o, err := f.svc.Get(context.Background(), u, p.OrderID)
		if err != nil || o.Status != order.StatusConfirmed || len(o.Items) != 1 || o.Items[0].PriceCents != 300 {
			t.Fatalf("after the writer: %+v %v", o, err)
		}
	}
	if n := f.R.Client.ZCard(context.Background(), f.keys.Pending(u)).Val(); n != 0 {
		t.Errorf("pending index still holds %d orders", n)
	}
}

// A crash after COMMIT and before XACK: the entries come back, and writing
// them again inserts nothing and adds nothing to the sold count.
func TestWriterCrashBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 5)
	f.placeN(t, u, "s", 5, 1)
	f.crashAfterCommit(t, "w1", Options{})
	if f.OrderRows(t) != 5 || f.pendingCount(t) != 5 {
		t.Fatalf("after the crash: rows %d pending %d, want 5 and 5", f.OrderRows(t), f.pendingCount(t))
	}
	// Restarted under the same name: it reads its own pending entries first.
	f.drain(t, "w1", Options{})
	if f.OrderRows(t) != 5 || f.Sold(t, round) != 5 || f.Count(t, `SELECT count(*) FROM order_items`) != 5 {
		t.Fatalf("after redelivery: rows %d sold %d, want 5 and 5", f.OrderRows(t), f.Sold(t, round))
	}
}

// A crash before COMMIT: nothing is written, and after the restart all is.
func TestWriterCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 5)
	f.placeN(t, u, "s", 4, 1)
	if _, err := f.crashBeforeCommit("w1", Options{}); err == nil {
		t.Fatal("Run should stop at the simulated crash")
	}
	if f.OrderRows(t) != 0 || f.Sold(t, round) != 0 {
		t.Fatalf("a batch was committed before the crash point")
	}
	f.drain(t, "w1", Options{})
	f.wantWritten(t, round, 4, 4)
}

// A writer that dies holding entries: a second writer, under another name,
// claims them once they have been idle long enough.
func TestSecondWriterClaimsDeadWritersEntries(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 6)
	f.placeN(t, u, "s", 6, 1)
	_, _ = f.crashBeforeCommit("dead", Options{})
	if f.pendingCount(t) != 6 {
		t.Fatalf("the dead writer holds %d entries, want 6", f.pendingCount(t))
	}
	f.drain(t, "alive", Options{ClaimIdle: 300 * time.Millisecond})
	f.wantWritten(t, round, 6, 6)
}

// Entries that can never be written (malformed; a round already full in
// PostgreSQL) go to the dead-letter stream after MaxDeliveries, while the
// good ones around them are written.
func TestPoisonEntriesAreDeadLettered(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 3)
	ctx := context.Background()
	f.place(t, u, "s", 1)
	stream := f.keys.Stream(0)
	f.R.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"order_id": "nope", "qty": "x"}})
	f.place(t, u, "s", 1)
	// Two forged events past what the round holds in PostgreSQL (3): the
	// CHECK (sold <= quantity) refuses one of them.
	for range 2 {
		forged := map[string]any{
			"order_id": uuid.NewString(), "user_id": u, "created_ms": "1700000000000", "total_cents": "100",
			"items": `[{"sku":"s","quantity":1,"price_cents":100,"round_id":` + itoa(round) + `}]`,
		}
		f.R.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: forged})
	}
	w := f.drain(t, "w1", Options{MaxDeliveries: 3})
	f.wantWritten(t, round, 3, 3)
	dead := f.R.Client.XRange(ctx, f.keys.Dead(0), "-", "+").Val()
	if len(dead) != 2 {
		t.Fatalf("dead letters = %d, want 2: %v", len(dead), dead)
	}
	reasons := dead[0].Values["reason"].(string) + " | " + dead[1].Values["reason"].(string)
	if !strings.Contains(reasons, "malformed") || !strings.Contains(reasons, "SQLSTATE 23514") {
		t.Errorf("reasons = %q, want the malformed entry and the round's CHECK", reasons)
	}
	if d := dead[0].Values["deliveries"]; d != "3" {
		t.Errorf("deliveries = %v, want 3", d)
	}
	if got := counterValue(t, w.m.deadLetters); got != 2 {
		t.Errorf("dead-letter metric = %v, want 2", got)
	}
}

// PostgreSQL unreachable for a while: the writer retries, acks nothing it
// did not commit, and writes everything once when it is back.
func TestWriterRidesOutDatabaseOutage(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 20)
	cc := f.DB.Pool.Config().ConnConfig
	proxy := testenv.NewProxy(t, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	f.WriterDB = poolVia(t, proxy, f.DB.URL)
	proxy.Down()
	f.placeN(t, u, "s", 10, 1)
	w := f.writer("w1", Options{})
	r := start(w)
	time.Sleep(800 * time.Millisecond)
	if f.OrderRows(t) != 0 || f.pendingCount(t) != 10 {
		t.Fatalf("during the outage: rows %d pending %d, want 0 and 10", f.OrderRows(t), f.pendingCount(t))
	}
	if counterVecValue(t, w.m.errors, "transient") == 0 {
		t.Fatal("no transient error counted during the outage")
	}
	proxy.Up(t)
	f.placeN(t, u, "s", 5, 1)
	f.drained(t)
	r.Stop(t)
	f.wantWritten(t, round, 15, 15)
}

// Trimming removes only acknowledged entries: never a pending one, never
// one not yet delivered.
func TestTrimNeverRemovesUnwrittenEntries(t *testing.T) {
	t.Parallel()
	f, _, u := newSale(t, 100)
	ctx := context.Background()
	f.placeN(t, u, "s", 10, 1)
	first, _ := f.crashBeforeCommit("first", Options{Batch: 4}) // 4 entries delivered, then "dies"
	if n, err := first.Trim(ctx); err != nil || n != 0 {
		t.Fatalf("trim with nothing acked removed %d (%v)", n, err)
	}
	f.drain(t, "second", Options{ClaimIdle: 200 * time.Millisecond})
	for range 3 {
		f.place(t, u, "s", 1) // undelivered: no writer runs now
	}
	// The second writer's own housekeeping may have trimmed some already.
	written := f.R.Client.XLen(ctx, f.keys.Stream(0)).Val() - 3
	n, err := first.Trim(ctx)
	if err != nil || n != written {
		t.Fatalf("trim removed %d (%v), want the %d written entries left", n, err, written)
	}
	if l := f.R.Client.XLen(ctx, f.keys.Stream(0)).Val(); l != 3 {
		t.Fatalf("stream holds %d entries, want the 3 undelivered", l)
	}
}

// The oversell race through Place and the writer: buyers released together;
// PostgreSQL ends with exactly the seeded units, equal to what Redis sold.
func TestRaceThenDrainMatchesRedis(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const units, buyers, tries = 40, 60, 3
	round := f.Sale(t, "hot", units, 1, 500)
	users := make([]string, buyers)
	for i := range users {
		users[i] = f.User(t)
	}
	r := start(f.writer("w1", Options{Batch: 16}))
	var accepted atomic.Int64
	var buys []func()
	for _, u := range users {
		buy := func() {
			_, err := f.svc.Place(context.Background(), u, []order.Line{{SKU: "hot", Quantity: 1}}, order.PlaceOptions{})
			if err == nil {
				accepted.Add(1)
			} else if !errors.Is(err, order.ErrOutOfStock) && !errors.Is(err, order.ErrLimitExceeded) {
				t.Error(err)
			}
		}
		buys = append(buys, slices.Repeat([]func(){buy}, tries)...)
	}
	ordertesting.Together(buys...)
	f.drained(t)
	r.Stop(t)
	avail, _ := f.Stock.Available(context.Background(), "hot")
	if accepted.Load() != units || avail[0] != 0 || f.OrderRows(t) != units || f.Sold(t, round) != units {
		t.Fatalf("accepted %d, available %d, rows %d, sold %d; want %d, 0, %d, %d",
			accepted.Load(), avail[0], f.OrderRows(t), f.Sold(t, round), units, units, units)
	}
	if n := f.Count(t, `SELECT count(*) FROM (SELECT user_id FROM orders GROUP BY user_id HAVING count(*) > 1) d`); n != 0 {
		t.Fatalf("%d buyers have more than the limit of 1", n)
	}
}

// A stop (SIGTERM) arriving mid-batch: the batch in hand is committed and
// acked before Run returns; nothing is left half done.
func TestWriterStopFinishesTheBatchInHand(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 5)
	f.placeN(t, u, "s", 5, 1)
	ctx, cancel := context.WithCancel(context.Background())
	w := f.writer("w1", Options{})
	w.faultBeforeCommit = func() error { cancel(); return nil } // the stop lands mid-transaction
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if f.OrderRows(t) != 5 || f.Sold(t, round) != 5 || f.pendingCount(t) != 0 {
		t.Fatalf("rows %d sold %d pending %d, want 5, 5, 0", f.OrderRows(t), f.Sold(t, round), f.pendingCount(t))
	}
}

// The reply to the writer's XREADGROUP is lost (the network drops Redis's
// answers, then resets): the entries were delivered to this consumer, which
// never saw them. The writer must go back to its own pending entries after
// a Redis error rather than leave them to be claimed after ClaimIdle (an
// hour here, so only the re-read can drain the stream within the test).
func TestWriterRereadsOwnPendingAfterLostReply(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 20)
	proxy := testenv.NewProxy(t, f.R.Client.Options().Addr)
	opts := *f.R.Client.Options()
	opts.Addr, opts.ReadTimeout, opts.MaxRetries = proxy.Addr(), 500*time.Millisecond, -1
	proxied := redis.NewClient(&opts)
	t.Cleanup(func() { _ = proxied.Close() })
	f.WriterRedis = proxied
	w := f.writer("w1", Options{ClaimIdle: time.Hour, Block: 300 * time.Millisecond})
	r := start(w)
	defer r.Stop(t)
	f.place(t, u, "s", 1)
	f.drained(t) // the writer is up and reading

	proxy.Blackhole(true)
	time.Sleep(100 * time.Millisecond) // a read is blocked in Redis
	for range 5 {
		f.place(t, u, "s", 1) // placed directly, not through the proxy
	}
	time.Sleep(800 * time.Millisecond) // delivered to w1; the reply is lost
	proxy.Blackhole(false)
	f.drained(t)
	f.wantWritten(t, round, 6, 6)
}
