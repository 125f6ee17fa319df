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

// live is a SKU's live round in the snapshot.
type live struct {
	sku                           string
	partition                     int
	round, quantity, avail, given int64
	buyers                        map[string]int64
	// buckets: each stock bucket's own counters, bucket 0 first, when
	// the round has several (nil for a round of one).
	buckets []bucketCounts
}

// bucketCounts is one stock bucket's own counters (its sale hash's).
type bucketCounts struct {
	seeded, movedIn, movedOut, released, available int64
}

func countsOf(sale map[string]string) bucketCounts {
	return bucketCounts{seeded: num(sale["seeded"]), movedIn: num(sale["moved_in"]), movedOut: num(sale["moved_out"]),
		released: num(sale["released"]), available: num(sale["available"])}
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
	// released: by SKU, the orders whose units went back this round.
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
	bySKU := map[int][]string{}
	for _, sku := range skus {
		p := a.parts.Of(sku)
		bySKU[p] = append(bySKU[p], sku)
	}
	start := time.Now()
	for _, parts := range a.groups() {
		if err := a.snapshotGroup(ctx, parts, bySKU, &s); err != nil {
			return snap{}, err
		}
	}
	if took := time.Since(start); s.foreign != nil && took > a.SettledWindow/4 {
		return snap{}, wrap("redis snapshot", fmt.Errorf("the partitions' snapshots took %s, over a quarter of the settled window %s: "+
			"the cross-partition accounting would not be exact; run the audit again", took, a.SettledWindow))
	}
	return s, nil
}

func (a *Auditor) snapshotGroup(ctx context.Context, parts []int, bySKU map[int][]string, s *snap) error {
	var keys, skus []string
	var buckets []int // of each SKU, as many sale hashes as the script reads
	for _, p := range parts {
		keys = append(keys, a.ledger.Keys(p).Stream)
	}
	for _, p := range parts {
		for _, sku := range bySKU[p] {
			n, err := a.bucketsOf(ctx, sku)
			if err != nil {
				return wrap("redis snapshot", err)
			}
			for b := range n {
				keys = append(keys, a.stock.BucketKey(sku, b, n), a.stock.BucketBuyersKey(sku, b, n))
			}
			skus, buckets = append(skus, sku), append(buckets, n)
		}
	}
	args := []any{a.ledger.Keys(0).Group, maxEntries, len(parts)}
	if s.foreign != nil { // one partition per group
		k := a.ledger.Keys(parts[0])
		keys = append(keys, k.Holds, k.Settled, k.Releases)
		args = append(args, len(skus), k.HoldPrefix)
	}
	out, err := snapshotScript.Run(ctx, a.rdb, keys, args...).Text()
	if err != nil {
		return wrap("redis snapshot", err)
	}
	var raw rawSnap
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		return wrap("redis snapshot", err)
	}
	rounds, perBucket, err := sumBuckets(raw.Rounds, skus, buckets)
	if len(raw.Streams) != len(parts) || err != nil {
		return wrap("redis snapshot", fmt.Errorf("%d streams read, want %d: %v", len(raw.Streams), len(parts), err))
	}
	raw.Rounds = rounds
	if s.foreign != nil {
		f, err := a.readForeign(ctx, a.ledger.Keys(parts[0]), raw, skus)
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
		if l, ok := liveRound(skus[i], r); ok {
			l.partition, l.buckets = a.parts.Of(skus[i]), perBucket[i]
			s.live = append(s.live, l)
		}
	}
	return nil
}

// bucketsOf is how many stock buckets sku's live round has, on a single
// Redis, where one snapshot reads them all; on a cluster the audit reads
// bucket 0 only (a bucketed round sells there only to the shoppers homed
// in it so far: docs/design/buckets.md).
func (a *Auditor) bucketsOf(ctx context.Context, sku string) (int, error) {
	if a.parts.Grouped() {
		return 1, nil
	}
	return a.stock.LearnBuckets(ctx, sku)
}

// sumBuckets folds the sale hashes and buyer counts read for each SKU
// (buckets[i] of them for SKU i, bucket 0 first) into one, as a round of
// one bucket reads: the round's fields from bucket 0, the buckets'
// available and released summed, their buyer counts joined (a shopper is
// counted in their home bucket only). A bucket of another round means
// the SKU is being reseeded: the snapshot is refused, to be taken again.
// perBucket holds each SKU's buckets' own counters (nil for one bucket),
// for their equations (compare.go's bucketProblems).
func sumBuckets(raw list[[2]any], skus []string, buckets []int) (out list[[2]any], perBucket [][]bucketCounts, err error) {
	out, perBucket = make(list[[2]any], 0, len(skus)), make([][]bucketCounts, len(skus))
	i := 0
	for k, n := range buckets {
		if i+n > len(raw) {
			return nil, nil, fmt.Errorf("%d sale hashes read, want more", len(raw))
		}
		sale := pairs(raw[i][0])
		// The buckets were counted before the snapshot: a reseeding with
		// another number in between would leave some unread, and on a
		// cluster (bucketsOf) only bucket 0 is read.
		if sale["round"] != "" && int(max(num(sale["buckets"]), 1)) != n {
			return nil, nil, fmt.Errorf("%s: read as %d buckets, its round has %s (being reseeded, or on a cluster, where the audit does not sum buckets yet)",
				skus[k], n, sale["buckets"])
		}
		if n == 1 {
			out, i = append(out, raw[i]), i+1
			continue
		}
		buyers := pairs(raw[i][1])
		avail, given := num(sale["available"]), num(sale["released"])
		perBucket[k] = []bucketCounts{countsOf(sale)}
		for _, r := range raw[i+1 : i+n] {
			bs := pairs(r[0])
			perBucket[k] = append(perBucket[k], countsOf(bs))
			if bs["round"] != sale["round"] {
				return nil, nil, fmt.Errorf("%s: its buckets hold rounds %s and %s (being reseeded)", skus[k], sale["round"], bs["round"])
			}
			avail, given = avail+num(bs["available"]), given+num(bs["released"])
			for u, c := range pairs(r[1]) {
				buyers[u] = strconv.FormatInt(num(buyers[u])+num(c), 10)
			}
		}
		sale["available"], sale["released"] = strconv.FormatInt(avail, 10), strconv.FormatInt(given, 10)
		out, i = append(out, [2]any{flatten(sale), flatten(buyers)}), i+n
	}
	if i != len(raw) {
		return nil, nil, fmt.Errorf("%d sale hashes read, want %d", len(raw), i)
	}
	return out, perBucket, nil
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
func (a *Auditor) readForeign(ctx context.Context, k ledger.StreamKeys, raw rawSnap, skus []string) (foreignSnap, error) {
	if raw.Now == 0 || raw.ReleasesLast == "" {
		return foreignSnap{}, fmt.Errorf("no time or releases log id read")
	}
	f := foreignSnap{now: raw.Now, taken: map[string]takenLines{}, released: map[string]map[string]bool{},
		truncated: raw.HoldsTruncated || raw.SettledTruncated}
	for i, sku := range skus {
		if round := pairs(raw.Rounds[i][0])["round"]; round != "" { // else no live round: not audited
			ids, err := a.releasedNow(ctx, sku, round)
			if err != nil {
				return foreignSnap{}, err
			}
			f.released[sku] = ids
		}
	}
	if err := a.unreleasedSince(ctx, k.Releases, raw.ReleasesLast, f.released); err != nil {
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

// releasedNow reads the released set of sku's live round (its id round)
// after the snapshot: every member it had then, since the set only grows
// while its round lives, and maybe some that joined since (SSCAN returns
// what was there throughout, and may return what came meanwhile). The
// round must still be the snapshot's when the scan is done, else the set
// may be another round's.
func (a *Auditor) releasedNow(ctx context.Context, sku, round string) (map[string]bool, error) {
	key := a.stock.ReleasedKey(sku)
	ids := map[string]bool{}
	iter := a.rdb.SScan(ctx, key, 0, "", settledPage).Iterator()
	for iter.Next(ctx) {
		ids[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("released set %s: %w", key, err)
	}
	now, err := a.rdb.HGet(ctx, a.stock.SaleKey(sku), "round").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("sale state of %s: %w", sku, err)
	}
	if now != round {
		return nil, fmt.Errorf("the round of %s changed from %s to %q during the audit: run it again", sku, round, now)
	}
	return ids, nil
}

// unreleasedSince takes out of released (by SKU) the orders that joined
// a released set after the snapshot: those the releases log records after
// its id then (last). Read after every set's scan, it names every order a
// scan may have seen join.
func (a *Auditor) unreleasedSince(ctx context.Context, key, last string, released map[string]map[string]bool) error {
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
				delete(released[sku], id)
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
