package audit

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
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
       coalesce(t.status, ''), coalesce(t.stream_id, '')
FROM order_items i JOIN orders o ON o.id = i.order_id
LEFT JOIN order_transitions t ON t.order_id = o.id
WHERE i.round_id = ANY($1)`

	persistedSQL = `SELECT id::text FROM orders WHERE id = ANY($1::uuid[])`
)

// live is a SKU's live round in the snapshot.
type live struct {
	sku                           string
	round, quantity, avail, given int64
	buyers                        map[string]int64
}

// snap is the Redis snapshot.
type snap struct {
	last, delivered streamID
	pending         []streamEntry // entry nil: missing from the stream
	undelivered     []streamEntry
	truncated       bool
	live            []live
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

func (a *Auditor) recordedRounds(ctx context.Context) ([]string, error) {
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
	Last        string       `json:"last"`
	Delivered   string       `json:"delivered"`
	Pending     list[[]any]  `json:"pending"`
	Undelivered list[[]any]  `json:"undelivered"`
	Truncated   bool         `json:"truncated"`
	Rounds      list[[2]any] `json:"rounds"`
}

type list[T any] []T

func (l *list[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "{}" {
		*l = nil
		return nil
	}
	return json.Unmarshal(b, (*[]T)(l))
}

func (a *Auditor) snapshot(ctx context.Context, skus []string) (snap, error) {
	keys := []string{a.keys.Stream}
	for _, sku := range skus {
		keys = append(keys, a.stock.SaleKey(sku), a.stock.BuyersKey(sku))
	}
	out, err := snapshotScript.Run(ctx, a.rdb, keys, a.keys.Group, maxEntries).Text()
	if err != nil {
		return snap{}, wrap("redis snapshot", err)
	}
	var raw rawSnap
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		return snap{}, wrap("redis snapshot", err)
	}
	s := snap{last: parseID(raw.Last), delivered: parseID(raw.Delivered), truncated: raw.Truncated}
	for _, p := range raw.Pending {
		s.pending = append(s.pending, entry(p))
	}
	for _, u := range raw.Undelivered {
		s.undelivered = append(s.undelivered, entry(u))
	}
	for i, r := range raw.Rounds {
		if l, ok := liveRound(skus[i], r); ok {
			s.live = append(s.live, l)
		}
	}
	return s, nil
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
}

func (a *Auditor) heldRows(ctx context.Context, rounds []int64) ([]heldRow, map[int64]int64, error) {
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
	_, err = pgx.ForEachRow(rows, []any{&r.orderID, &r.userID, &sid, &r.round, &r.qty, &r.final, &fsid}, func() error {
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
