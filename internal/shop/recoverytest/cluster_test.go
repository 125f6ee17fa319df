// Package recoverytest holds internal/recovery's tests through the whole application
// (shoptest), so recovery's own tests build only recovery and what it imports.
package recoverytest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/recovery"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// clusterShop is a sale on a 3-master Redis Cluster with 6 order
// partitions: the stock seeded through inventory, two SKUs in every
// partition. A purchase on a cluster is not built yet (its script spans
// the user's slot and the SKU's), so the tests place orders as the
// reserve script will within the partition's slot (stock, buyer count and
// the order event in one script; the status hash beside), cancel them
// through inventory's release with its outbox entry, and write them to
// PostgreSQL as the writer does (rows, then XACK, then the status).
type clusterShop struct {
	*shoptest.ClusterSale
	keys  []ledger.StreamKeys
	units int64

	mu     sync.Mutex
	orders []*clusterOrder
}

type clusterOrder struct {
	id, user, sku string
	qty           int
	round         int64
	items, at     string // the event's items JSON and created_ms
	cancelled     bool
}

func newClusterShop(t *testing.T) *clusterShop {
	t.Helper()
	s := &clusterShop{ClusterSale: shoptest.NewClusterSale(t, "c", 40), units: 40}
	s.keys = ledger.New(s.RDB, s.Prefix, s.Parts).Partitions()
	for _, k := range s.keys {
		if err := s.RDB.XGroupCreateMkStream(context.Background(), k.Stream, k.Group, "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// reserveScript is a one-line reservation as reserve.lua makes it, on the
// keys of one partition's slot: KEYS stream, sale, buyers; ARGV order id,
// user, quantity, SKU. Returns {stream id, items, created_ms}, or {} when
// the stock is short.
var reserveScript = redis.NewScript(`
local s = redis.call('HMGET', KEYS[2], 'round', 'available', 'price_cents', 'released')
local qty = tonumber(ARGV[3])
if not s[1] or tonumber(s[2]) < qty then return {} end
redis.call('HINCRBY', KEYS[2], 'available', -qty)
redis.call('HINCRBY', KEYS[3], ARGV[2], qty)
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local items = cjson.encode({{sku = ARGV[4], quantity = qty, price_cents = tonumber(s[3]),
  round_id = tonumber(s[1]), released = tonumber(s[4] or '0')}})
local id = redis.call('XADD', KEYS[1], '*', 'order_id', ARGV[1], 'user_id', ARGV[2], 'created_ms', now,
  'total_cents', string.format('%d', qty * tonumber(s[3])), 'items', items, 'expires_ms', '0')
return {id, items, now}`)

// place buys qty of sku for user; nil when sold out.
func (s *clusterShop) place(t *testing.T, user, sku string, qty int) *clusterOrder {
	ctx, p := context.Background(), s.Parts.Of(sku)
	// The id names its home partition, as the order service stamps it.
	o := &clusterOrder{id: s.Parts.Stamp(uuid.Must(uuid.NewV7()), p).String(), user: user, sku: sku, qty: qty}
	out, err := reserveScript.Run(ctx, s.RDB, []string{s.keys[p].Stream, s.Stock.SaleKey(sku), s.Stock.BuyersKey(sku)},
		o.id, user, qty, sku).StringSlice()
	if err != nil {
		t.Error(err)
		return nil
	}
	if len(out) == 0 {
		return nil
	}
	o.items, o.at = out[1], out[2]
	lr, _, err := s.Stock.Live(ctx, sku)
	if err != nil {
		t.Error(err)
	}
	o.round = lr.Round
	if err := s.RDB.HSet(ctx, s.keys[p].StatusKey(o.id), "user_id", user, "status", order.StatusPending, "items", o.items,
		"total_cents", strconv.Itoa(qty*100), "created_ms", o.at, "expires_ms", "0", "partition", strconv.Itoa(p)).Err(); err != nil {
		t.Error(err)
	}
	s.mu.Lock()
	s.orders = append(s.orders, o)
	s.mu.Unlock()
	return o
}

// cancel gives o's units back with its transition event in its partition's
// stream, as the lifecycle's release does, then marks its status.
func (s *clusterShop) cancel(t *testing.T, o *clusterOrder) {
	ctx, p := context.Background(), s.Parts.Of(o.sku)
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	r, err := s.Stock.Release(ctx, inventory.Release{OrderID: o.id, UserID: o.user,
		Lines: []inventory.ReleaseLine{{SKU: o.sku, Quantity: o.qty, RoundID: o.round}},
		Outbox: &inventory.Outbox{Stream: s.keys[p].Stream, Values: []string{"kind", "transition", "order_id", o.id,
			"user_id", o.user, "status", order.StatusCancelled, "at_ms", now, "payment_ref", "", "created_ms", o.at, "items", o.items}}})
	if err != nil || r.Units != int64(o.qty) {
		t.Errorf("cancel %s: %+v %v", o.id, r, err)
		return
	}
	s.RDB.HSet(ctx, s.keys[p].StatusKey(o.id), "status", order.StatusCancelled)
	s.mu.Lock()
	o.cancelled = true
	s.mu.Unlock()
}

// write records what partition p's stream delivers, as the writer does:
// the rows, then XACK and the confirmed status; the acked entries are
// trimmed when trim is set. With ack false the entries stay pending.
func (s *clusterShop) write(t *testing.T, p int, ack, trim bool) {
	ctx, k := context.Background(), s.keys[p]
	res, err := s.RDB.XReadGroup(ctx, &redis.XReadGroupArgs{Group: k.Group, Consumer: "w", Streams: []string{k.Stream, ">"},
		Count: 1000, Block: -1}).Result()
	if err == redis.Nil || (err == nil && len(res) == 0) {
		return
	}
	if err != nil {
		t.Error(err)
		return
	}
	var ids []string
	for _, m := range res[0].Messages {
		ids = append(ids, m.ID)
		e, err := writer.ParseEntry(m)
		if err != nil {
			t.Errorf("entry %v: %v", m, err)
			continue
		}
		if e.Transition != "" {
			s.execErr(t, `INSERT INTO order_transitions (order_id, status, at, stream_id) VALUES ($1, $2, now(), $3)
				ON CONFLICT DO NOTHING`, e.OrderID, e.Transition, m.ID)
			continue
		}
		ms, _ := strconv.ParseInt(m.Values["created_ms"].(string), 10, 64)
		s.execErr(t, `INSERT INTO orders (id, user_id, total_cents, stream_id, created_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT DO NOTHING`, e.OrderID, e.UserID, m.Values["total_cents"], m.ID, time.UnixMilli(ms))
		for _, it := range e.Items {
			s.execErr(t, `INSERT INTO order_items (order_id, sku, round_id, quantity, price_cents) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT DO NOTHING`, e.OrderID, it.SKU, it.RoundID, it.Quantity, it.PriceCents)
		}
	}
	if !ack {
		return
	}
	s.RDB.XAck(ctx, k.Stream, k.Group, ids...)
	for _, m := range res[0].Messages {
		if e, _ := writer.ParseEntry(m); e.Transition == "" {
			status := k.StatusKey(e.OrderID)
			if s.RDB.HGet(ctx, status, "status").Val() == order.StatusPending {
				s.RDB.HSet(ctx, status, "status", order.StatusConfirmed)
			}
		}
	}
	if trim {
		s.RDB.XDel(ctx, k.Stream, ids...)
	}
}

func (s *clusterShop) execErr(t *testing.T, sql string, args ...any) {
	if _, err := s.DB.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Error(err)
	}
}

func (s *clusterShop) auditor() *audit.Auditor {
	return audit.New(s.DB.Pool, s.RDB, s.Stock, s.Prefix, s.Log)
}

func (s *clusterShop) audit(t *testing.T, lagBound time.Duration) audit.Report {
	t.Helper()
	a := s.auditor()
	a.LagBound = lagBound
	rep, err := a.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (s *clusterShop) recover(t *testing.T, accepted []string) recovery.Report {
	t.Helper()
	rep, err := recovery.New(s.DB.Pool, s.RDB, s.Stock, s.Prefix, s.Log).Run(context.Background(), accepted)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// expect checks every SKU's live stock against the orders placed: what
// the orders not cancelled (nor lost) hold, buyer by buyer.
func (s *clusterShop) expect(t *testing.T, lost string) {
	t.Helper()
	ctx := context.Background()
	for _, sku := range slices.Concat(s.SKUs...) {
		want := map[string]string{}
		held := map[string]int64{}
		var units int64
		for _, o := range s.orders {
			if o.sku == sku && !o.cancelled && o.id != lost {
				held[o.user] += int64(o.qty)
				units += int64(o.qty)
			}
		}
		for u, n := range held {
			want[u] = strconv.FormatInt(n, 10)
		}
		lr, ok, err := s.Stock.Live(ctx, sku)
		got := s.RDB.HGetAll(ctx, s.Stock.BuyersKey(sku)).Val()
		if err != nil || !ok || lr.Available != s.units-units || len(got) != len(want) {
			t.Fatalf("%s: live %+v %v %v, buyers %v; want available %d, buyers %v", sku, lr, ok, err, got, s.units-units, want)
		}
		for u, n := range want {
			if got[u] != n {
				t.Fatalf("%s: buyers %v, want %v", sku, got, want)
			}
		}
	}
}

// On a 3-master cluster with 6 partitions: buyers in every partition buy
// and cancel while a writer per partition writes (some entries acked and
// trimmed, some left pending) and audits run again and again: every audit
// is clean (each partition's snapshot is one script on its slot, atomic
// with the purchases there, and PostgreSQL is cut at each order's home
// stream). A unit from nowhere in partition 4 is named there. A failover
// that loses partition 3's stream, a SKU's live state, another's counts,
// statuses and an accepted order is repaired by recover: every round
// exact, the lost order reported by id, the statuses back; the audit is
// clean, and a second run changes nothing.
func TestAuditAndRecoverOnACluster(t *testing.T) {
	t.Parallel()
	s := newClusterShop(t)
	ctx := context.Background()
	users := []string{s.User(t), s.User(t), s.User(t)}
	start := make(chan struct{})
	var buyers sync.WaitGroup
	for p := range s.SKUs {
		buyers.Add(1)
		go func() {
			defer buyers.Done()
			<-start
			for i := range 16 {
				o := s.place(t, users[(p+i)%len(users)], s.SKUs[p][i%2], 1+i%3)
				if o != nil && i%4 == 1 {
					s.cancel(t, o)
				}
				if i%3 == 2 {
					s.write(t, p, i%2 == 0, i%4 == 0)
				}
			}
		}()
	}
	stop := make(chan struct{})
	waitAudits := shoptest.CleanAudits(t, start, stop, s.auditor)
	close(start)
	buyers.Wait()
	close(stop)
	clean := waitAudits()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d orders, %d clean audits during the sale", len(s.orders), clean)
	if clean == 0 {
		t.Fatal("no audit ran during the sale: the race tested nothing")
	}
	for p := range s.keys {
		s.write(t, p, true, p%2 == 0)
		s.write(t, p, true, false) // the pending ones of earlier reads
	}
	// The orders left pending above are delivered again to another
	// consumer, as the writer claims a dead one's.
	for _, k := range s.keys {
		msgs, _, err := s.RDB.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: k.Stream, Group: k.Group, Consumer: "w2",
			Start: "0-0", Count: 1000}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 0 {
			ids := make([]string, len(msgs))
			for i, m := range msgs {
				ids[i] = m.ID
			}
			s.RDB.XAck(ctx, k.Stream, k.Group, ids...)
			for _, m := range msgs {
				if e, _ := writer.ParseEntry(m); e.Transition == "" && s.RDB.HGet(ctx, k.StatusKey(e.OrderID), "status").Val() == order.StatusPending {
					s.RDB.HSet(ctx, k.StatusKey(e.OrderID), "status", order.StatusConfirmed)
				}
			}
		}
	}
	if rep := s.audit(t, 0); !rep.OK || len(rep.Rounds) != 12 {
		t.Fatalf("audit after the sale: %d rounds, %+v", len(rep.Rounds), rep.Problems)
	}
	s.expect(t, "")

	// A unit from nowhere in partition 4.
	bad := s.SKUs[4][1]
	s.RDB.HIncrBy(ctx, s.Stock.SaleKey(bad), "available", 1)
	rep := s.audit(t, 0)
	if rep.OK || !slices.ContainsFunc(rep.Problems, func(p audit.Problem) bool {
		return p.Kind == "stock_redis" && p.SKU == bad && p.Partition != nil && *p.Partition == 4
	}) {
		t.Fatalf("a unit from nowhere in %s (partition 4): %+v", bad, rep.Problems)
	}
	s.RDB.HIncrBy(ctx, s.Stock.SaleKey(bad), "available", -1)

	// The failover.
	lost := s.place(t, users[0], s.SKUs[5][0], 2)
	s.RDB.XDel(ctx, s.keys[5].Stream, s.RDB.XRevRangeN(ctx, s.keys[5].Stream, "+", "-", 1).Val()[0].ID)
	s.RDB.Del(ctx, s.keys[3].Stream)
	gone := s.SKUs[2][0]
	s.RDB.Unlink(ctx, s.Stock.SaleKey(gone), s.Stock.BuyersKey(gone), s.Stock.SaleKey(gone)+":released")
	s.RDB.HSet(ctx, s.Stock.SaleKey(s.SKUs[1][1]), "available", s.units)
	s.RDB.Del(ctx, s.Stock.BuyersKey(s.SKUs[1][1]))
	var statusesLost int
	for _, o := range s.orders {
		if p := s.Parts.Of(o.sku); (p == 1 || p == 3) && !o.cancelled {
			s.RDB.Del(ctx, s.keys[p].StatusKey(o.id))
			statusesLost++
		}
	}
	rep = s.audit(t, 0)
	if rep.OK || !slices.ContainsFunc(rep.Problems, func(p audit.Problem) bool {
		return p.Kind == "stream_behind" && p.Partition != nil && *p.Partition == 3
	}) {
		t.Fatalf("partition 3's stream lost: %+v", rep.Problems)
	}

	accepted := make([]string, len(s.orders))
	for i, o := range s.orders {
		accepted[i] = o.id
	}
	rec := s.recover(t, accepted)
	if !slices.Equal(rec.Lost, []recovery.Lost{{OrderID: lost.id, Status: order.StatusPending}}) ||
		rec.StatusesRestored != statusesLost || len(rec.Rounds) != 12 {
		t.Fatalf("lost %+v, %d statuses restored, %d rounds; want %s, %d, 12", rec.Lost, rec.StatusesRestored, len(rec.Rounds), lost.id, statusesLost)
	}
	s.expect(t, lost.id)
	for _, o := range s.orders {
		if p := s.Parts.Of(o.sku); (p == 1 || p == 3) && !o.cancelled {
			m := s.RDB.HGetAll(ctx, s.keys[p].StatusKey(o.id)).Val()
			if home, ok := ledger.StatusHash(m).Home(); !ok || home != p || m["status"] != order.StatusConfirmed {
				t.Fatalf("restored status of %s: %v, want confirmed in partition %d", o.id, m, p)
			}
		}
	}
	// Clean, but for the lost order, whose status says pending: it is not
	// in PostgreSQL, and never will be.
	rep = s.audit(t, 0)
	if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != "not_persisted" || !slices.Equal(rep.Problems[0].OrderIDs, []string{lost.id}) {
		t.Fatalf("audit after recover: %+v", rep.Problems)
	}
	if rep := s.audit(t, audit.DefaultLagBound); !rep.OK {
		t.Fatalf("audit after recover, with the lag bound: %+v", rep.Problems)
	}
	again := s.recover(t, accepted)
	if again.StatusesRestored != 0 || len(again.Lost) != 1 {
		t.Fatalf("second run: %+v", again)
	}
	for _, r := range again.Rounds {
		if r.Changed {
			t.Fatalf("second run changed %s: %+v", r.SKU, r)
		}
	}
}
