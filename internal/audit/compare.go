package audit

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/writer"
)

// held is one order's units in one round as PostgreSQL (and the stream's
// unrecorded entries) tell.
type held struct {
	user  string
	units int64
	final string // "", paid, cancelled, expired, refunded
}

// postgresHeld builds, per live (s.live's index), the orders PostgreSQL
// records up to the snapshot's last entry, completed by the entries the
// snapshot holds unrecorded (pending or undelivered): each order counted
// once. On a cluster a line held outside its order's home is not counted
// from them but from its own partition's snapshot (foreignHeld), and a
// line of a bucketed round belongs to its buyer's home bucket's live.
func postgresHeld(s snap, rows []heldRow, homes homes) []map[string]*held {
	out := make([]map[string]*held, len(s.live))
	ofRound := map[int64][]int{} // a round's lives: one, or its buckets
	for i, l := range s.live {
		out[i] = map[string]*held{}
		ofRound[l.round] = append(ofRound[l.round], i)
	}
	liveOf := func(round int64, user string) (int, bool) {
		for _, i := range ofRound[round] {
			if l := s.live[i]; l.of <= 1 || inventory.HomeBucket(user, l.of) == l.bucket {
				return i, true
			}
		}
		return 0, false
	}
	foreign := func(id string, i int) bool { return s.foreign != nil && s.home(id) != s.live[i].partition }
	known := make([]map[string]knownLine, len(s.live)) // the foreign lines PostgreSQL and the streams name
	know := func(i int, id, user string, qty, created int64) {
		if known[i] == nil {
			known[i] = map[string]knownLine{}
		}
		known[i][id] = knownLine{user: user, units: qty, createdMS: created}
	}
	cuts := s.lasts()
	for _, r := range rows {
		i, ok := liveOf(r.round, r.userID)
		if !ok {
			continue
		}
		if foreign(r.orderID, i) {
			know(i, r.orderID, r.userID, r.qty, r.createdMS)
			continue
		}
		if homes.after(r.orderID, r.stream, cuts) {
			continue // accepted after the snapshot of its home partition
		}
		h := &held{user: r.userID, units: r.qty}
		if r.final != "" && !homes.after(r.orderID, r.finalStream, cuts) {
			h.final = r.final
		}
		out[i][r.orderID] = h
	}
	for _, st := range s.streams {
		for _, e := range append(append([]streamEntry(nil), st.pending...), st.undelivered...) {
			ent, ok := parsed(e)
			if !ok {
				continue
			}
			for _, it := range ent.Items {
				i, live := liveOf(it.RoundID, ent.UserID)
				if !live {
					continue
				}
				if !foreign(ent.OrderID, i) {
					applyItem(out[i], ent, it)
				} else if ent.Transition == "" {
					know(i, ent.OrderID, ent.UserID, int64(it.Quantity), ent.CreatedMS)
				}
			}
		}
	}
	if s.foreign != nil {
		for i, l := range s.live {
			foreignHeld(out[i], l, s.foreign[l.partition], known[i], s.fence)
		}
	}
	return out
}

// knownLine is a foreign line of a live round as PostgreSQL or a stream
// entry names it.
type knownLine struct {
	user             string
	units, createdMS int64
}

// foreignHeld adds to orders (round l's, or bucket l's: its buyers' only)
// the lines of orders homed elsewhere, from l's partition's snapshot f
// alone, so at the one instant its buyer counts were read: an order whose
// lines there were taken (its hold, or its entry in the settled log)
// holds them unless l's released set names it; an order PostgreSQL or a stream names that f
// does not is counted only when it was accepted more than fence ms
// before f's instant (it took them long ago, and its log entry was
// trimmed); a younger one takes them after f's instant (package doc).
func foreignHeld(orders map[string]*held, l live, f foreignSnap, known map[string]knownLine, fence int64) {
	released := f.released[l.sale]
	add := func(id, user string, units int64) {
		h := &held{user: user, units: units}
		if released[id] {
			h.final = order.StatusCancelled // given back: cancelled or expired
		}
		orders[id] = h
	}
	for id, t := range f.taken {
		if l.of > 1 && inventory.HomeBucket(t.user, l.of) != l.bucket {
			continue // another bucket's, in the same partition
		}
		for _, it := range t.items {
			if it.SKU == l.sku && it.RoundID == l.round {
				add(id, t.user, int64(it.Quantity))
			}
		}
	}
	for id, k := range known {
		if _, taken := f.taken[id]; !taken && k.createdMS < f.now-fence {
			add(id, k.user, k.units)
		}
	}
}

func parsed(e streamEntry) (writer.Entry, bool) {
	if e.msg == nil {
		return writer.Entry{}, false // missing from the stream: reported on its own
	}
	ent, err := writer.ParseEntry(*e.msg)
	if err != nil {
		return writer.Entry{}, false // the writer dead-letters it; reported then
	}
	return ent, true
}

func applyItem(orders map[string]*held, ent writer.Entry, it order.ReservedItem) {
	h := orders[ent.OrderID]
	if h == nil {
		h = &held{user: ent.UserID, units: int64(it.Quantity)}
		orders[ent.OrderID] = h
	}
	if ent.Transition != "" {
		h.final = order.Final(h.final, ent.Transition)
	}
}

func (h *held) holds() bool {
	return !order.GivenBack(h.final)
}

// compareRounds checks every live round on both sides, buyer by buyer.
func compareRounds(s snap, rows []heldRow, homes homes, quantities map[int64]int64) ([]Round, []Problem) {
	lives, byLive := mergeBuckets(s.live, postgresHeld(s, rows, homes))
	var rounds []Round
	var problems []Problem
	for i, l := range lives {
		r := Round{SKU: l.sku, RoundID: l.round, Quantity: l.quantity, Available: l.avail, Released: l.given, Moving: moving(l.buckets)}
		for _, n := range l.buyers {
			r.HeldRedis += n
		}
		perUser, ordersOf := map[string]int64{}, map[string][]string{}
		for id, h := range byLive[i] {
			ordersOf[h.user] = append(ordersOf[h.user], id)
			if h.holds() {
				perUser[h.user] += h.units
				r.HeldPostgres += h.units
			}
		}
		rounds = append(rounds, r)
		found := append(roundProblems(r, l, quantities), buyerProblems(r, l.buyers, perUser, ordersOf)...)
		for _, p := range append(found, bucketProblems(r, l.buckets, byLive[i])...) {
			p.Partition = partition(l.partition)
			problems = append(problems, p)
		}
	}
	return rounds, problems
}

func roundProblems(r Round, l live, quantities map[int64]int64) []Problem {
	var out []Problem
	p := func(kind, format string, args ...any) {
		out = append(out, Problem{Kind: kind, SKU: r.SKU, RoundID: r.RoundID, Detail: fmt.Sprintf(format, args...)})
	}
	if q, ok := quantities[r.RoundID]; !ok {
		p("quantity", "round %d of %s is live in Redis but not recorded in PostgreSQL", r.RoundID, r.SKU)
	} else if q != l.quantity {
		p("quantity", "PostgreSQL seeded %d units, Redis %d", q, l.quantity)
	}
	if r.Quantity != r.Available+r.Moving+r.HeldRedis {
		p("stock_redis", "quantity %d != available %d + moving %d + %d units held by the buyer counts", r.Quantity, r.Available, r.Moving, r.HeldRedis)
	}
	if r.Quantity != r.Available+r.Moving+r.HeldPostgres {
		p("stock_postgres", "quantity %d != available %d + moving %d + %d units held by orders in PostgreSQL and the stream",
			r.Quantity, r.Available, r.Moving, r.HeldPostgres)
	}
	return out
}

// bucketProblems checks each stock bucket's own equation, seeded +
// moved_in + released = available + taken + moved_out, where taken is the
// units of every order line of the round reserved from it (its buyers'
// home bucket), given back since or not: a unit made or lost inside a
// bucket shows there even when the round's sums agree (docs/design/buckets.md).
func bucketProblems(r Round, buckets []bucketCounts, orders map[string]*held) []Problem {
	if len(buckets) < 2 {
		return nil
	}
	taken := make([]int64, len(buckets))
	for _, h := range orders {
		taken[inventory.HomeBucket(h.user, len(buckets))] += h.units
	}
	var out []Problem
	for b, c := range buckets {
		if c.seeded+c.movedIn+c.released == c.available+taken[b]+c.movedOut {
			continue
		}
		out = append(out, Problem{Kind: "bucket", SKU: r.SKU, RoundID: r.RoundID, Bucket: partition(b), Detail: fmt.Sprintf(
			"bucket %d of %d: seeded %d + moved in %d + released %d != available %d + %d units its orders took + moved out %d",
			b, len(buckets), c.seeded, c.movedIn, c.released, c.available, taken[b], c.movedOut)})
	}
	return out
}

// buyerProblems names each buyer whose count in Redis differs from the
// units their orders hold.
func buyerProblems(r Round, redisCounts, pgCounts map[string]int64, ordersOf map[string][]string) []Problem {
	users := map[string]bool{}
	for u := range redisCounts {
		users[u] = true
	}
	for u := range pgCounts {
		users[u] = true
	}
	var out []Problem
	for u := range users {
		if redisCounts[u] == pgCounts[u] {
			continue
		}
		ids := ordersOf[u]
		slices.Sort(ids)
		out = append(out, Problem{Kind: "buyer", SKU: r.SKU, RoundID: r.RoundID, OrderIDs: ids,
			Detail: fmt.Sprintf("buyer %s: Redis counts %d units, their orders hold %d", u, redisCounts[u], pgCounts[u])})
	}
	slices.SortFunc(out, func(a, b Problem) int { return cmp.Compare(a.Detail, b.Detail) })
	return out
}

func partition(p int) *int { return &p }

// streamProblems: pending entries gone from a stream, a backlog too long
// to audit, dead letters, and accepted orders PostgreSQL lacks.
func (a *Auditor) streamProblems(ctx context.Context, s snap) ([]Problem, error) {
	var out []Problem
	for _, st := range s.streams {
		for _, e := range st.pending {
			if e.msg == nil {
				out = append(out, Problem{Kind: "pending_missing", Partition: partition(st.partition),
					Detail: fmt.Sprintf("entry %s of %s is pending for the writers but gone from the stream", e.id, a.ledger.Keys(st.partition).Stream)})
			}
		}
		if st.truncated {
			out = append(out, Problem{Kind: "backlog", Partition: partition(st.partition),
				Detail: fmt.Sprintf("over %d entries of %s unrecorded", maxEntries, a.ledger.Keys(st.partition).Stream)})
		}
	}
	for p, f := range s.foreign {
		if f.truncated {
			out = append(out, Problem{Kind: "backlog", Partition: partition(p), Detail: fmt.Sprintf(
				"over %d holds, or settled log entries of one ms, in partition %d: its foreign lines are not all accounted", maxEntries, p)})
		}
	}
	for _, k := range a.ledger.Partitions() {
		dead, err := a.deadLetters(ctx, k)
		if err != nil {
			return nil, err
		}
		out = append(out, dead...)
	}
	missing, err := a.notPersisted(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, missing...), nil
}

func (a *Auditor) deadLetters(ctx context.Context, k ledger.StreamKeys) ([]Problem, error) {
	msgs, err := a.rdb.XRangeN(ctx, k.Dead, "-", "+", 1000).Result()
	if err != nil {
		return nil, wrap("dead letters", err)
	}
	out := make([]Problem, 0, len(msgs))
	for _, m := range msgs {
		id, _ := m.Values["event_order_id"].(string)
		p := Problem{Kind: "dead_letter", Partition: partition(k.Partition),
			Detail: fmt.Sprintf("entry %v of %s dead-lettered: %v", m.Values["source_id"], k.Stream, m.Values["reason"])}
		if id != "" {
			p.OrderIDs = []string{id}
		}
		out = append(out, p)
	}
	return out, nil
}

// notPersisted finds the orders Redis accepted more than LagBound ago
// (their status hashes) that PostgreSQL does not have. Rejected orders
// are the dead letters' business.
func (a *Auditor) notPersisted(ctx context.Context) ([]Problem, error) {
	old, err := a.oldOrders(ctx, time.Now().Add(-a.LagBound).UnixMilli())
	if err != nil || len(old) == 0 {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dbReadTimeout)
	defer cancel()
	rows, err := a.db.Query(ctx, persistedSQL, old)
	if err != nil {
		return nil, wrap("persisted orders", err)
	}
	have := map[string]bool{}
	var id string
	if _, err := pgxForEach(rows, &id, func() { have[id] = true }); err != nil {
		return nil, wrap("persisted orders", err)
	}
	var out []Problem
	for _, id := range old {
		if !have[id] {
			out = append(out, Problem{Kind: "not_persisted", OrderIDs: []string{id},
				Detail: fmt.Sprintf("order %s was accepted over %s ago and is not in PostgreSQL", id, a.LagBound)})
		}
	}
	return out, nil
}

// oldOrders scans the status hashes (on every master of a cluster) for
// orders created before cutoff (ms), sorted.
func (a *Auditor) oldOrders(ctx context.Context, cutoff int64) ([]string, error) {
	var mu sync.Mutex
	var out []string
	err := a.scan(ctx, a.ledger.Keys(0).StatusPattern, func(ctx context.Context, batch []string) error {
		var ids []string
		pipe := a.rdb.Pipeline()
		var cmds []*redis.MapStringStringCmd
		for _, k := range batch {
			if id, ok := a.ledger.Keys(0).StatusID(k); ok { // the pattern may match other keys
				ids = append(ids, id)
				cmds = append(cmds, pipe.HGetAll(ctx, k))
			}
		}
		if len(cmds) == 0 {
			return nil
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, c := range cmds {
			status, created := ledger.StatusHash(c.Val()).Live()
			if status != "" && status != order.StatusRejected && created > 0 && created < cutoff {
				out = append(out, ids[i])
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("order statuses", err)
	}
	slices.Sort(out)
	return out, nil
}

// scan hands fn the keys matching pattern, in batches of up to 500: SCAN
// on the one server, or on every master of a cluster (a node's SCAN sees
// only its own slots).
func (a *Auditor) scan(ctx context.Context, pattern string, fn func(context.Context, []string) error) error {
	one := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 500 {
				if err := fn(ctx, batch); err != nil {
					return err
				}
				batch = nil
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(batch) > 0 {
			return fn(ctx, batch)
		}
		return nil
	}
	if c, ok := a.rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return one(ctx, node) })
	}
	return one(ctx, a.rdb)
}

// lastIDs reads every partition's last stream id now (after PostgreSQL).
func (a *Auditor) lastIDs(ctx context.Context) ([]streamID, error) {
	out := make([]streamID, a.parts.Count())
	for p, k := range a.ledger.Partitions() {
		info, err := a.rdb.XInfoStream(ctx, k.Stream).Result()
		switch {
		case err == nil:
			out[p] = parseID(info.LastGeneratedID)
		case err.Error() != "ERR no such key":
			return nil, wrap("order stream", err)
		}
	}
	return out, nil
}

// streamBehind reports rows of the live rounds whose stream entries (the
// order's or its final transition's) come after the last id of their home
// partition's stream, read after PostgreSQL was: ids only grow, so no
// entry can be recorded before it is added, and such a row means Redis
// lost entries it had accepted (a replica promoted before it caught up).
// The snapshot's cut would otherwise take those rows for orders accepted
// after it, and hide the loss. One problem per partition.
func streamBehind(rows []heldRow, homes homes, lasts []streamID) []Problem {
	byPart := map[int][]string{}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.orderID] || !(homes.after(r.orderID, r.stream, lasts) || homes.after(r.orderID, r.finalStream, lasts)) {
			continue
		}
		seen[r.orderID] = true
		p := homes[r.orderID][0]
		byPart[p] = append(byPart[p], r.orderID)
	}
	var out []Problem
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		ids := byPart[p]
		slices.Sort(ids)
		last := lasts[p]
		out = append(out, Problem{Kind: "stream_behind", Partition: partition(p), OrderIDs: ids, Detail: fmt.Sprintf(
			"PostgreSQL records %d orders whose stream entries come after the last id %d-%d of their order stream (partition %d): "+
				"Redis lost writes it had accepted (a failover?); run shop recover", len(ids), last.ms, last.seq, p)})
	}
	return out
}
