package audit

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
)

var (
	//go:embed snapshot.lua
	snapshotLua    string
	snapshotScript = redis.NewScript(snapshotLua)
)

// The SQL the audit reads with (read only; the tables are inventory's and
// order's).
const (
	skusSQL = `SELECT DISTINCT sku FROM sale_rounds ORDER BY sku`

	quantitiesSQL = `SELECT id, quantity FROM sale_rounds WHERE id = ANY($1)`

	// Every line of the live rounds' orders, with the order's recorded
	// final state, if any.
	heldSQL = `
SELECT o.id::text, o.user_id::text, o.stream_id, i.round_id, i.quantity,
       coalesce(t.status, ''), coalesce(t.stream_id, ''),
       (extract(epoch FROM o.created_at) * 1000)::bigint,
       (SELECT array_agg(j.sku ORDER BY j.sku) FROM order_items j WHERE j.order_id = o.id)
FROM order_items i JOIN orders o ON o.id = i.order_id
LEFT JOIN order_transitions t ON t.order_id = o.id
WHERE i.round_id = ANY($1)`

	persistedSQL = `SELECT id::text FROM orders WHERE id = ANY($1::uuid[])`
)

// live is a SKU's live round in the snapshot; on a cluster, one stock
// bucket of it (of > 1), read in its own partition's snapshot, which
// compareRounds merges with the round's other buckets (mergeBuckets).
type live struct {
	sku                           string
	partition                     int
	round, quantity, avail, given int64
	buyers                        map[string]int64
	// buckets: each stock bucket's own counters, bucket 0 first, when
	// the round has several (nil for a round of one).
	buckets []bucketCounts
	// bucket of of: the one bucket this live is, on a cluster (of 0: the
	// whole round); sale is its sale hash.
	bucket, of int
	sale       string
}

// snap is the Redis snapshot: every partition's stream (indexed by
// partition) and the live rounds, each group of partitions read at one
// instant (see the package doc).
type snap struct {
	streams []streamSnap
	live    []live
	// On a cluster: by partition, what accounts there for the lines held
	// for orders homed elsewhere, read in the same instant as its SKUs;
	// home names an order's home (its id). nil on a single Redis.
	foreign []foreignSnap
	home    func(orderID string) int
	// fence (ms): an order accepted longer than this before a partition's
	// snapshot and not in its holds nor settled log took its lines there
	// long ago (the log's entry was trimmed): see the package doc.
	fence int64
}

// foreignSnap is one partition's record of the lines it holds for orders
// homed elsewhere, at its snapshot's instant now (that server's clock).
type foreignSnap struct {
	now int64
	// taken: the orders whose lines here were taken (a hold, or a hold
	// dropped because the order committed: the settled log).
	taken map[string]takenLines
	// released: by sale hash (a SKU's, or a stock bucket's on a cluster),
	// the orders whose units went back to it this round.
	released map[string]map[string]bool
	// truncated: the holds or the settled log's newest entries exceeded
	// what one snapshot reads (a backlog problem: not exact then).
	truncated bool
}

type takenLines struct {
	user  string
	items []order.ReservedItem
}

// streamSnap is one partition's stream in the snapshot.
type streamSnap struct {
	partition       int
	last, delivered streamID
	pending         []streamEntry // entry nil: missing from the stream
	undelivered     []streamEntry
	truncated       bool
}

type streamEntry struct {
	id  string
	msg *redis.XMessage
}

func (s snap) liveRoundIDs() []int64 {
	ids := make([]int64, 0, len(s.live))
	for _, l := range s.live {
		ids = append(ids, l.round)
	}
	return ids
}

// lasts are the streams' last ids, by partition: the cut of PostgreSQL.
func (s snap) lasts() []streamID {
	out := make([]streamID, len(s.streams))
	for i, st := range s.streams {
		out[i] = st.last
	}
	return out
}

// neverLiveSQL: rounds never marked opened, seeded long enough ago that
// their seeding has ended (inventory's settleAfter is 5 s). One that sold
// went live (its mark alone was lost).
const neverLiveSQL = `
SELECT sku, id, quantity, seeded_at FROM sale_rounds
WHERE opened_at IS NULL AND sold = 0 AND seeded_at < now() - interval '1 minute' AND NOT id = ANY($1)
ORDER BY id`

// neverLive lists the recorded rounds that never went live; live are the
// rounds Redis has live (one whose opened mark alone was lost is live).
func (a *Auditor) neverLive(ctx context.Context, live []int64) ([]NeverLive, error) {
	ctx, cancel := context.WithTimeout(ctx, dbReadTimeout)
	defer cancel()
	rows, err := a.db.Query(ctx, neverLiveSQL, live)
	if err != nil {
		return nil, wrap("rounds never live", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NeverLive, error) {
		var n NeverLive
		err := r.Scan(&n.SKU, &n.RoundID, &n.Quantity, &n.SeededAt)
		return n, err
	})
	if err != nil {
		return nil, wrap("rounds never live", err)
	}
	if out == nil {
		out = []NeverLive{}
	}
	return out, nil
}

func (a *Auditor) recordedRounds(ctx context.Context) ([]string, error) {
	// The audit's first statement, and a small one: a PostgreSQL that does
	// not answer fails it as fast as any other PostgreSQL route.
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rows, err := a.db.Query(ctx, skusSQL)
	if err != nil {
		return nil, wrap("sale rounds", err)
	}
	skus, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrap("sale rounds", err)
	}
	return skus, nil
}

// rawSnap is snapshot.lua's JSON (cjson writes an empty array as {}).
type rawSnap struct {
	Streams list[rawStream] `json:"streams"`
	Rounds  list[[2]any]    `json:"rounds"`
	Now     int64           `json:"now"`
	Holds   list[[3]string] `json:"holds"`
	Settled list[string]    `json:"settled"`
	// ReleasesLast is the releases log's last id at the snapshot.
	ReleasesLast string `json:"releases_last"`
	// HoldsTruncated, SettledTruncated: more holds, or more log entries
	// scored in the snapshot's ms or later, than the script reads.
	HoldsTruncated   bool `json:"holds_truncated"`
	SettledTruncated bool `json:"settled_truncated"`
}

type rawStream struct {
	Last        string      `json:"last"`
	Delivered   string      `json:"delivered"`
	Pending     list[[]any] `json:"pending"`
	Undelivered list[[]any] `json:"undelivered"`
	Truncated   bool        `json:"truncated"`
}

type list[T any] []T

func (l *list[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "{}" {
		*l = nil
		return nil
	}
	return json.Unmarshal(b, (*[]T)(l))
}

// groups are the partitions each snapshot script reads, with their SKUs:
// every partition in one script on a single Redis (one instant for all,
// so an order whose lines fall in several partitions is seen whole), one
// script per partition on a cluster (a script's keys share a slot).
func (a *Auditor) groups() [][]int {
	if !a.parts.Grouped() {
		all := make([]int, a.parts.Count())
		for p := range all {
			all[p] = p
		}
		return [][]int{all}
	}
	out := make([][]int, a.parts.Count())
	for p := range out {
		out[p] = []int{p}
	}
	return out
}

// snapshot reads every group of partitions, each in one atomic script.
// On a cluster the snapshots, and what is read after each (the settled
// log's pages, the released sets, the releases log), must all fall within
// a quarter of the settled window (the time fence of the package doc),
// else the audit cannot be exact and says so.
func (a *Auditor) snapshot(ctx context.Context, skus []string) (snap, error) {
	s := snap{streams: make([]streamSnap, a.parts.Count()), home: a.parts.Home, fence: a.SettledWindow.Milliseconds() / 2}
	if a.parts.Grouped() {
		s.foreign = make([]foreignSnap, a.parts.Count())
	}
	byPart, err := a.saleRefs(ctx, skus)
	if err != nil {
		return snap{}, wrap("redis snapshot", err)
	}
	start := time.Now()
	for _, parts := range a.groups() {
		if err := a.snapshotGroup(ctx, parts, byPart, &s); err != nil {
			return snap{}, err
		}
	}
	if err := oneRoundEach(s.live); err != nil {
		return snap{}, wrap("redis snapshot", err)
	}
	if took := time.Since(start); s.foreign != nil && took > a.SettledWindow/4 {
		return snap{}, wrap("redis snapshot", fmt.Errorf("the partitions' snapshots took %s, over a quarter of the settled window %s: "+
			"the cross-partition accounting would not be exact; run the audit again", took, a.SettledWindow))
	}
	return s, nil
}

func (a *Auditor) snapshotGroup(ctx context.Context, parts []int, byPart map[int][]saleRef, s *snap) error {
	var keys []string
	var refs []saleRef
	for _, p := range parts {
		keys = append(keys, a.ledger.Keys(p).Stream)
	}
	for _, p := range parts {
		for _, r := range byPart[p] {
			for b := r.bucket; b < r.bucket+r.reads(); b++ {
				keys = append(keys, a.stock.BucketKey(r.sku, b, r.buckets), a.stock.BucketBuyersKey(r.sku, b, r.buckets))
			}
			refs = append(refs, r)
		}
	}
	args := []any{a.ledger.Keys(0).Group, maxEntries, len(parts)}
	if s.foreign != nil { // one partition per group
		k := a.ledger.Keys(parts[0])
		keys = append(keys, k.Holds, k.Settled, k.Releases)
		args = append(args, len(refs), k.HoldPrefix)
	}
	out, err := snapshotScript.Run(ctx, a.rdb, keys, args...).Text()
	if err != nil {
		return wrap("redis snapshot", err)
	}
	var raw rawSnap
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		return wrap("redis snapshot", err)
	}
	rounds, perBucket, err := sumBuckets(raw.Rounds, refs)
	if len(raw.Streams) != len(parts) || err != nil {
		return wrap("redis snapshot", fmt.Errorf("%d streams read, want %d: %v", len(raw.Streams), len(parts), err))
	}
	raw.Rounds = rounds
	if s.foreign != nil {
		f, err := a.readForeign(ctx, a.ledger.Keys(parts[0]), raw, refs)
		if err != nil {
			return wrap("redis snapshot", err)
		}
		s.foreign[parts[0]] = f
	}
	for i, p := range parts {
		r := raw.Streams[i]
		st := streamSnap{partition: p, last: parseID(r.Last), delivered: parseID(r.Delivered), truncated: r.Truncated}
		for _, e := range r.Pending {
			st.pending = append(st.pending, entry(e))
		}
		for _, e := range r.Undelivered {
			st.undelivered = append(st.undelivered, entry(e))
		}
		s.streams[p] = st
	}
	for i, r := range raw.Rounds {
		ref := refs[i]
		if l, ok := liveRound(ref.sku, r); ok {
			l.partition, l.buckets = a.stock.BucketPartition(ref.sku, ref.bucket, ref.buckets), perBucket[i]
			l.sale = a.stock.BucketKey(ref.sku, ref.bucket, ref.buckets)
			if ref.one {
				l.bucket, l.of = ref.bucket, ref.buckets
			}
			s.live = append(s.live, l)
		}
	}
	return nil
}

// flatten is pairs' inverse: a hash as HGETALL answers it.
func flatten(m map[string]string) []any {
	out := make([]any, 0, 2*len(m))
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

// settledEntry is an entry of a settled log (the order package's unhold
// script writes it).
type settledEntry struct {
	OrderID string                   `json:"order_id"`
	User    string                   `json:"user"`
	Items   list[order.ReservedItem] `json:"items"`
}

// readForeign reads a partition's holds, settled log and its SKUs'
// released sets as they were at the snapshot's instant: the holds and the
// log's newest entries from the script, the released sets and the log's
// older entries after it (package doc, "Bounded snapshots").
func (a *Auditor) readForeign(ctx context.Context, k ledger.StreamKeys, raw rawSnap, refs []saleRef) (foreignSnap, error) {
	if raw.Now == 0 || raw.ReleasesLast == "" {
		return foreignSnap{}, fmt.Errorf("no time or releases log id read")
	}
	f := foreignSnap{now: raw.Now, taken: map[string]takenLines{}, released: map[string]map[string]bool{},
		truncated: raw.HoldsTruncated || raw.SettledTruncated}
	salesOf := map[string][]string{} // by SKU, its sale hashes read here
	for i, r := range refs {
		if round := pairs(raw.Rounds[i][0])["round"]; round != "" { // else no live round: not audited
			sale := a.stock.BucketKey(r.sku, r.bucket, r.buckets)
			ids, err := a.releasedNow(ctx, sale, round)
			if err != nil {
				return foreignSnap{}, err
			}
			f.released[sale], salesOf[r.sku] = ids, append(salesOf[r.sku], sale)
		}
	}
	if err := a.unreleasedSince(ctx, k.Releases, raw.ReleasesLast, f.released, salesOf); err != nil {
		return foreignSnap{}, err
	}
	for _, h := range raw.Holds {
		var items []order.ReservedItem
		if err := json.Unmarshal([]byte(h[2]), &items); err != nil {
			return foreignSnap{}, fmt.Errorf("hold of order %s: %w", h[0], err)
		}
		f.taken[h[0]] = takenLines{user: h[1], items: items}
	}
	older, err := a.settledBefore(ctx, k.Settled, raw.Now)
	if err != nil {
		return foreignSnap{}, err
	}
	for _, e := range append(older, raw.Settled...) {
		var s settledEntry
		if err := json.Unmarshal([]byte(e), &s); err != nil {
			return foreignSnap{}, fmt.Errorf("settled log entry %q: %w", e, err)
		}
		if _, ok := f.taken[s.OrderID]; !ok {
			f.taken[s.OrderID] = takenLines{user: s.User, items: s.Items}
		}
	}
	return f, nil
}

// settledPage is how many settled log entries one read after the
// snapshot asks for.
const settledPage = 1000

// settledBefore reads the entries of the settled log scored before now
// (ms), in pages by score: a page starts at the last score the previous
// one read, whose entries are read again and counted once, so an entry
// trimmed meanwhile never shifts the next page past one still there. A
// page filled by a single ms is read again twice as large.
func (a *Auditor) settledBefore(ctx context.Context, key string, now int64) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	from, page := "-inf", int64(settledPage)
	for {
		zs, err := a.rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: from, Max: fmt.Sprintf("(%d", now), Count: page}).Result()
		if err != nil {
			return nil, fmt.Errorf("settled log %s: %w", key, err)
		}
		for _, z := range zs {
			if m, _ := z.Member.(string); !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
		if int64(len(zs)) < page {
			return out, nil
		}
		next := strconv.FormatFloat(zs[len(zs)-1].Score, 'f', -1, 64)
		if next == from {
			page *= 2
		}
		from = next
	}
}

// releasedNow reads the released set beside sale (a SKU's sale hash, or a
// stock bucket's) of its live round (its id round) after the snapshot:
// every member it had then, since the set only grows while its round
// lives, and maybe some that joined since (SSCAN returns what was there
// throughout, and may return what came meanwhile). The round must still
// be the snapshot's when the scan is done, else the set may be another
// round's.
func (a *Auditor) releasedNow(ctx context.Context, sale, round string) (map[string]bool, error) {
	key := sale + ":released"
	ids := map[string]bool{}
	iter := a.rdb.SScan(ctx, key, 0, "", settledPage).Iterator()
	for iter.Next(ctx) {
		ids[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("released set %s: %w", key, err)
	}
	now, err := a.rdb.HGet(ctx, sale, "round").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("sale state %s: %w", sale, err)
	}
	if now != round {
		return nil, fmt.Errorf("the round of %s changed from %s to %q during the audit: run it again", sale, round, now)
	}
	return ids, nil
}

// unreleasedSince takes out of released (by sale hash; salesOf names each
// SKU's) the orders that joined a released set after the snapshot: those
// the releases log records after its id then (last). Read after every
// set's scan, it names every order a scan may have seen join.
func (a *Auditor) unreleasedSince(ctx context.Context, key, last string, released map[string]map[string]bool, salesOf map[string][]string) error {
	from := "(" + last
	for {
		msgs, err := a.rdb.XRangeN(ctx, key, from, "+", settledPage).Result()
		if err != nil {
			return fmt.Errorf("releases log %s: %w", key, err)
		}
		for _, m := range msgs {
			id, _ := m.Values["order_id"].(string)
			skus, _ := m.Values["skus"].(string)
			for _, sku := range strings.Split(skus, ",") {
				for _, sale := range salesOf[sku] {
					delete(released[sale], id)
				}
			}
		}
		if len(msgs) < settledPage {
			return nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

// entry reads [id, [field, value...] | false].
func entry(v []any) streamEntry {
	e := streamEntry{id: fmt.Sprint(v[0])}
	fields, ok := v[1].([]any)
	if !ok {
		return e
	}
	m := redis.XMessage{ID: e.id, Values: map[string]any{}}
	for i := 0; i+1 < len(fields); i += 2 {
		m.Values[fmt.Sprint(fields[i])] = fmt.Sprint(fields[i+1])
	}
	e.msg = &m
	return e
}

// liveRound reads [HGETALL sale, HGETALL buyers]; ok is false for a SKU
// with no live round.
func liveRound(sku string, r [2]any) (live, bool) {
	sale, buyers := pairs(r[0]), pairs(r[1])
	if sale["round"] == "" {
		return live{}, false
	}
	l := live{sku: sku, round: num(sale["round"]), quantity: num(sale["quantity"]),
		avail: num(sale["available"]), given: num(sale["released"]), buyers: map[string]int64{}}
	for u, n := range buyers {
		l.buyers[u] = num(n)
	}
	return l, true
}

func pairs(v any) map[string]string {
	m := map[string]string{}
	flat, _ := v.([]any)
	for i := 0; i+1 < len(flat); i += 2 {
		m[fmt.Sprint(flat[i])] = fmt.Sprint(flat[i+1])
	}
	return m
}

func num(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// streamID is a stream entry id, ordered as Redis orders them.
type streamID struct{ ms, seq uint64 }

func parseID(s string) streamID {
	ms, seq, _ := strings.Cut(s, "-")
	a, _ := strconv.ParseUint(ms, 10, 64)
	b, _ := strconv.ParseUint(seq, 10, 64)
	return streamID{a, b}
}

func (x streamID) after(y streamID) bool { return x.ms > y.ms || (x.ms == y.ms && x.seq > y.seq) }

// heldRow is one order line of a live round in PostgreSQL.
type heldRow struct {
	orderID, userID string
	stream          streamID
	round, qty      int64
	final           string
	finalStream     streamID
	createdMS       int64
	skus            []string // every line's SKU of the order
}

func (a *Auditor) heldRows(ctx context.Context, rounds []int64) ([]heldRow, map[int64]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, dbReadTimeout)
	defer cancel()
	quantities := map[int64]int64{}
	rows, err := a.db.Query(ctx, quantitiesSQL, rounds)
	if err != nil {
		return nil, nil, wrap("round quantities", err)
	}
	var id, q int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &q}, func() error { quantities[id] = q; return nil }); err != nil {
		return nil, nil, wrap("round quantities", err)
	}
	rows, err = a.db.Query(ctx, heldSQL, rounds)
	if err != nil {
		return nil, nil, wrap("order lines", err)
	}
	var out []heldRow
	var r heldRow
	var sid, fsid string
	_, err = pgx.ForEachRow(rows, []any{&r.orderID, &r.userID, &sid, &r.round, &r.qty, &r.final, &fsid, &r.createdMS, &r.skus}, func() error {
		r.stream, r.finalStream = parseID(sid), parseID(fsid)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, nil, wrap("order lines", err)
	}
	return out, quantities, nil
}

func pgxForEach(rows pgx.Rows, dest any, fn func()) (any, error) {
	return pgx.ForEachRow(rows, []any{dest}, func() error { fn(); return nil })
}

// homes are the partitions each order's entries may have gone to (its
// home, see ledger.Ledger.HomeOf): one when known, else every partition
// its lines fall in. A row is cut by its home's stream: an order whose
// home is not certain from its SKUs and whose entries fall between its
// candidates' cuts (in any of cuts) is looked up in its status hash,
// which names the home. A home still unsure is cut only when every
// candidate cuts it (an order that old lost its status hash to its week's
// expiry, or to a failover that recover repairs).
type homes map[string][]int

func (a *Auditor) homes(ctx context.Context, rows []heldRow, cuts ...[]streamID) (homes, error) {
	out := homes{}
	var unsure []string
	for _, r := range rows {
		if _, ok := out[r.orderID]; ok {
			continue
		}
		home, certain := a.ledger.HomeOf(r.orderID, r.skus)
		if certain {
			out[r.orderID] = []int{home}
			continue
		}
		out[r.orderID] = a.partitionsOf(r.skus)
		if !cutsAgree(out[r.orderID], cuts, r.stream, r.finalStream) {
			unsure = append(unsure, r.orderID)
		}
	}
	for from := 0; from < len(unsure); from += 1000 {
		if err := a.lookUpHomes(ctx, unsure[from:min(from+1000, len(unsure))], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (a *Auditor) partitionsOf(skus []string) []int {
	var out []int
	for _, sku := range skus {
		if p := a.parts.Of(sku); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// cutsAgree reports whether every candidate home cuts each id alike.
func cutsAgree(home []int, cuts [][]streamID, ids ...streamID) bool {
	for _, c := range cuts {
		for _, id := range ids {
			for _, p := range home[1:] {
				if id.after(c[p]) != id.after(c[home[0]]) {
					return false
				}
			}
		}
	}
	return true
}

func (a *Auditor) lookUpHomes(ctx context.Context, ids []string, out homes) error {
	pipe := a.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, a.ledger.Keys(0).StatusKey(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap("order statuses", err)
	}
	for i, c := range cmds {
		if p, ok := ledger.StatusHash(c.Val()).Home(); ok && p < a.parts.Count() {
			out[ids[i]] = []int{p}
		}
	}
	return nil
}

// after reports whether id comes after the cut of the order's home: after
// every candidate's, when the home is unsure.
func (h homes) after(orderID string, id streamID, cuts []streamID) bool {
	home := h[orderID]
	for _, p := range home {
		if !id.after(cuts[p]) {
			return false
		}
	}
	return len(home) > 0
}
