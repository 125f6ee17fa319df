package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
)

// The keys and tables read here belong to inventory (the sale hash and its
// buyer counts) and order (the order stream, its group and dead letters).
// They are read directly, not through the packages, on purpose: the check
// must not trust the code it checks. Only where the keys fall (the order
// partitions and, on a cluster, the SKU's tag) comes from keyspace.

// Layout is where a shop's keys are: its prefix and its order partitions
// (the zero Partitions: one, on a single Redis).
type Layout struct {
	Prefix     string
	Partitions keyspace.Partitions
}

func (l Layout) saleKey(sku string) string {
	if l.Partitions.Grouped() {
		return l.Prefix + "sale:" + l.Partitions.Tag(l.Partitions.Of(sku)) + sku
	}
	return l.Prefix + "sale:{" + sku + "}"
}

func (l Layout) buyersKey(sku string) string { return l.saleKey(sku) + ":buyers" }

// stream is order partition k's stream ("orders" alone: partition 0 on a
// single Redis); its dead letters are stream + ":dead".
func (l Layout) stream(k int) string {
	if l.Partitions.Legacy(k) {
		return l.Prefix + "orders"
	}
	return l.Prefix + "orders:" + l.Partitions.Tag(k)
}

func (l Layout) releasedKey(sku string) string { return l.saleKey(sku) + ":released" }

// statusKey is order id's status hash: on a cluster tagged by the order's
// home partition, which the id's last byte names (the order package stamps
// it, keyspace documents it); on a single Redis untagged.
func (l Layout) statusKey(id string) string {
	if l.Partitions.Grouped() {
		return l.Prefix + "order:" + l.Partitions.Tag(l.Partitions.Home(id)) + id
	}
	return l.Prefix + "order:" + id
}

// kindTransition marks the order stream's transition entries (an order
// leaving confirmed), beside its order events.
const kindTransition = "transition"

const writersGroup = "writers"

// LayoutOf is the layout of the keys under prefix: the order partitions
// the server recorded when it started (order's orders:partitions key),
// grouped when rdb is a Redis Cluster client, since a server on a cluster
// tags each SKU's keys by its partition (keyspace). On a single Redis a
// missing count is one partition (the layout of before partitions); on a
// cluster every server records it, so a missing count means no server ran
// on these keys, and guessing one would read other keys than a server's.
func LayoutOf(ctx context.Context, rdb redis.UniversalClient, prefix string) (Layout, error) {
	_, grouped := rdb.(*redis.ClusterClient)
	n, err := rdb.Get(ctx, prefix+"orders:partitions").Int()
	switch {
	case errors.Is(err, redis.Nil) && grouped:
		return Layout{}, fmt.Errorf("no order partitions recorded under %q on the cluster (%sorders:partitions): no shop server ran on these keys", prefix, prefix)
	case errors.Is(err, redis.Nil):
		n = 1
	case err != nil:
		return Layout{}, fmt.Errorf("read the order partitions: %w", err)
	}
	return Layout{Prefix: prefix, Partitions: keyspace.NewPartitions(n, grouped)}, nil
}

// ReadStore reads the sale of sku's latest round straight from Redis
// (keys under prefix, one order partition) and PostgreSQL.
func ReadStore(ctx context.Context, rdb redis.UniversalClient, db *pgxpool.Pool, prefix, sku string) (*Store, error) {
	return ReadStoreIn(ctx, rdb, db, Layout{Prefix: prefix}, sku)
}

// ReadStoreIn is ReadStore for the keys of l: every partition's stream,
// pending entries and dead letters are read.
func ReadStoreIn(ctx context.Context, rdb redis.UniversalClient, db *pgxpool.Pool, l Layout, sku string) (*Store, error) {
	st := &Store{}
	err := db.QueryRow(ctx, `SELECT id, quantity, sold FROM sale_rounds WHERE sku = $1 ORDER BY id DESC LIMIT 1`, sku).
		Scan(&st.Round, &st.RoundQuantity, &st.RoundSold)
	if err != nil {
		return nil, fmt.Errorf("read the sale round of %s: %w", sku, err)
	}
	if st.Rows, err = readRows(ctx, db, st.Round); err != nil {
		return nil, err
	}
	if err := readLive(ctx, rdb, l, sku, st); err != nil {
		return nil, err
	}
	for k := range l.Partitions.Count() {
		if err := readPartition(ctx, rdb, l.stream(k), sku, st); err != nil {
			return nil, err
		}
	}
	streamsOfRows(l, st)
	// The statuses after the pending lists: a writer acknowledges an entry
	// and confirms its order in one step, so an entry no longer pending
	// has its status confirmed by now (read the other way round, a drain
	// in between would show acknowledged orders still pending).
	return st, readLifecycle(ctx, rdb, db, l, sku, st)
}

// streamsOfRows names the stream each row's entry was in: the one stream
// of a single partition; on a cluster the order's home partition, which its
// id is stamped with. On a single Redis with several partitions the home is
// the order's first SKU's, which PostgreSQL does not keep: the stream is
// known only for an entry still in a stream, else left empty (and the
// duplicate check then compares the entry ids alone).
func streamsOfRows(l Layout, st *Store) {
	inStream := map[string]string{}
	for _, en := range st.Stream {
		inStream[en.OrderID] = en.Stream
	}
	for i := range st.Rows {
		r := &st.Rows[i]
		switch {
		case l.Partitions.Count() == 1:
			r.Stream = l.stream(0)
		case l.Partitions.Grouped():
			r.Stream = l.stream(l.Partitions.Home(r.OrderID))
		default:
			r.Stream = inStream[r.OrderID]
		}
	}
}

// readPartition adds one partition's entries, dead letters (order events
// and transitions apart) and pending ids to st.
func readPartition(ctx context.Context, rdb redis.UniversalClient, stream, sku string, st *Store) error {
	entries, _, err := readEntries(ctx, rdb, stream, "", sku, st.Round)
	if err != nil {
		return err
	}
	dead, deadTransitions, err := readEntries(ctx, rdb, stream+":dead", "event_", sku, st.Round)
	if err != nil {
		return err
	}
	for _, d := range deadTransitions {
		st.DeadTransitions = append(st.DeadTransitions, d.OrderID)
	}
	pending, missing, err := readPending(ctx, rdb, stream)
	if err != nil {
		return err
	}
	st.Stream, st.Dead = append(st.Stream, entries...), append(st.Dead, dead...)
	st.Pending, st.Missing = append(st.Pending, pending...), append(st.Missing, missing...)
	return nil
}

// readLifecycle reads what the order lifecycle left: the released set,
// each order's status in Redis, and the transitions PostgreSQL recorded.
func readLifecycle(ctx context.Context, rdb redis.UniversalClient, db *pgxpool.Pool, l Layout, sku string, st *Store) error {
	var err error
	if st.ReleasedIDs, err = readSet(ctx, rdb, l.releasedKey(sku)); err != nil {
		return err
	}
	if st.Statuses, err = readStatuses(ctx, rdb, l, orders(st)); err != nil {
		return err
	}
	st.Transitions, err = readTransitions(ctx, db, st.Round)
	return err
}

func readSet(ctx context.Context, rdb redis.UniversalClient, key string) ([]string, error) {
	var out []string
	iter := rdb.SScan(ctx, key, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return out, nil
}

// readStatuses reads the status field of each order's status hash, in
// pipelined pages; an order without one is left out.
func readStatuses(ctx context.Context, rdb redis.UniversalClient, l Layout, of map[string]Entry) (map[string]string, error) {
	ids := slices.Sorted(maps.Keys(of))
	out := make(map[string]string, len(ids))
	for page := range slices.Chunk(ids, 1000) {
		cmds := make([]*redis.StringCmd, len(page))
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range page {
				cmds[i] = p.HGet(ctx, l.statusKey(id), "status")
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read order statuses: %w", err)
		}
		for i, c := range cmds {
			if s, err := c.Result(); err == nil {
				out[page[i]] = s
			}
		}
	}
	return out, nil
}

const transitionsSQL = `
SELECT t.order_id::text, t.status
FROM order_transitions t
WHERE t.order_id IN (SELECT order_id FROM order_items WHERE round_id = $1)`

func readTransitions(ctx context.Context, db *pgxpool.Pool, round int64) (map[string]string, error) {
	rows, err := db.Query(ctx, transitionsSQL, round)
	if err != nil {
		return nil, fmt.Errorf("read order transitions: %w", err)
	}
	out := map[string]string{}
	var id, status string
	_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		out[id] = status
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read order transitions: %w", err)
	}
	return out, nil
}

const rowsSQL = `
SELECT o.id::text, o.user_id::text, o.stream_id, i.quantity
FROM order_items i JOIN orders o ON o.id = i.order_id
WHERE i.round_id = $1`

func readRows(ctx context.Context, db *pgxpool.Pool, round int64) ([]Row, error) {
	rows, err := db.Query(ctx, rowsSQL, round)
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var x Row
		return x, r.Scan(&x.OrderID, &x.UserID, &x.StreamID, &x.Units)
	})
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	return out, nil
}

func readLive(ctx context.Context, rdb redis.UniversalClient, l Layout, sku string, st *Store) error {
	sale, err := rdb.HGetAll(ctx, l.saleKey(sku)).Result()
	if err != nil {
		return fmt.Errorf("read the live sale: %w", err)
	}
	st.LiveRound, _ = strconv.ParseInt(sale["round"], 10, 64)
	st.Available, _ = strconv.ParseInt(sale["available"], 10, 64)
	st.Released, _ = strconv.ParseInt(sale["released"], 10, 64)
	buyers, err := rdb.HGetAll(ctx, l.buyersKey(sku)).Result()
	if err != nil {
		return fmt.Errorf("read the buyer counts: %w", err)
	}
	st.Buyers = make(map[string]int64, len(buyers))
	for u, n := range buyers {
		st.Buyers[u], _ = strconv.ParseInt(n, 10, 64)
	}
	buckets, _ := strconv.Atoi(sale["buckets"])
	return readBuckets(ctx, rdb, l, sku, buckets, st)
}

// readBuckets adds the units, releases and buyer counts of buckets 1..
// of a round split over buckets (docs/design/buckets.md) to st's.
func readBuckets(ctx context.Context, rdb redis.UniversalClient, l Layout, sku string, buckets int, st *Store) error {
	keys := inventory.NewPartitionedStock(rdb, l.Prefix, l.Partitions)
	for b := 1; b < buckets; b++ {
		key := keys.BucketKey(sku, b, buckets)
		sale, err := rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("read bucket %d of the live sale: %w", b, err)
		}
		avail, _ := strconv.ParseInt(sale["available"], 10, 64)
		released, _ := strconv.ParseInt(sale["released"], 10, 64)
		st.Available, st.Released = st.Available+avail, st.Released+released
		buyers, err := rdb.HGetAll(ctx, key+":buyers").Result()
		if err != nil {
			return fmt.Errorf("read the buyer counts of bucket %d: %w", b, err)
		}
		for u, n := range buyers {
			c, _ := strconv.ParseInt(n, 10, 64)
			st.Buyers[u] += c
		}
	}
	return nil
}

// readEntries reads a stream whole, in pages, and keeps the entries with
// a line of sku in round: order events, and transition events apart;
// field names start with pre (the dead-letter stream keeps the event's
// fields as event_<name>).
func readEntries(ctx context.Context, rdb redis.UniversalClient, stream, pre, sku string, round int64) (events, transitions []Entry, err error) {
	for from := "-"; ; {
		msgs, err := rdb.XRangeN(ctx, stream, from, "+", 1000).Result()
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, m := range msgs {
			en, ok := entryOf(m, stream, pre, sku, round)
			switch {
			case !ok:
			case m.Values[pre+"kind"] == kindTransition:
				transitions = append(transitions, en)
			default:
				events = append(events, en)
			}
		}
		if len(msgs) < 1000 {
			return events, transitions, nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

func entryOf(m redis.XMessage, stream, pre, sku string, round int64) (Entry, bool) {
	field := func(name string) string { s, _ := m.Values[pre+name].(string); return s }
	var items []struct {
		SKU      string `json:"sku"`
		Quantity int64  `json:"quantity"`
		RoundID  int64  `json:"round_id"`
	}
	if json.Unmarshal([]byte(field("items")), &items) != nil {
		return Entry{}, false
	}
	for _, it := range items {
		if it.SKU == sku && it.RoundID == round {
			return Entry{Stream: stream, StreamID: m.ID, OrderID: field("order_id"), UserID: field("user_id"), Units: it.Quantity}, true
		}
	}
	return Entry{}, false
}

// readPending lists the group's pending ids and those the stream no longer
// holds (XRANGE on each).
func readPending(ctx context.Context, rdb redis.UniversalClient, stream string) (pending, missing []string, err error) {
	for from := "-"; ; {
		page, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: stream, Group: writersGroup, Start: from, End: "+", Count: 1000,
		}).Result()
		if isNoGroup(err) {
			return pending, missing, nil // no writer ever ran
		}
		if err != nil {
			return nil, nil, fmt.Errorf("XPENDING %s: %w", stream, err)
		}
		for _, p := range page {
			pending = append(pending, p.ID)
			msgs, err := rdb.XRange(ctx, stream, p.ID, p.ID).Result()
			if err != nil {
				return nil, nil, fmt.Errorf("XRANGE %s %s: %w", stream, p.ID, err)
			}
			if len(msgs) == 0 {
				missing = append(missing, p.ID)
			}
		}
		if len(page) < 1000 {
			return pending, missing, nil
		}
		from = "(" + page[len(page)-1].ID
	}
}

func isNoGroup(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re.Error()) >= 7 && re.Error()[:7] == "NOGROUP"
}

// StockSampler reads a sale's live stock every so often while a sale
// runs, to catch it below zero at any moment, not only at the end.
type StockSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	s    Samples
}

// SampleStock starts sampling sku's available units every interval until
// Stop.
func SampleStock(rdb redis.UniversalClient, prefix, sku string, every time.Duration) *StockSampler {
	return SampleStockIn(rdb, Layout{Prefix: prefix}, sku, every)
}

// SampleStockIn is SampleStock for the keys of l.
func SampleStockIn(rdb redis.UniversalClient, l Layout, sku string, every time.Duration) *StockSampler {
	sm := &StockSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go sm.run(rdb, l.saleKey(sku), every)
	return sm
}

func (sm *StockSampler) run(rdb redis.UniversalClient, key string, every time.Duration) {
	defer close(sm.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		sm.sample(rdb, key)
		select {
		case <-sm.stop:
			return
		case <-tick.C:
		}
	}
}

func (sm *StockSampler) sample(rdb redis.UniversalClient, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := rdb.HGet(ctx, key, "available").Int64()
	sm.mu.Lock()
	defer sm.mu.Unlock()
	switch {
	case err != nil:
		sm.s.Errors++
	case sm.s.N == 0 || n < sm.s.Min:
		sm.s.Min, sm.s.MinAt = n, time.Now()
		fallthrough
	default:
		sm.s.N++
	}
}

// Stop ends the sampling and returns what it saw.
func (sm *StockSampler) Stop() *Samples {
	close(sm.stop)
	<-sm.done
	sm.mu.Lock()
	defer sm.mu.Unlock()
	s := sm.s
	return &s
}

// ReadDrained reads the stores like ReadStore, again and again until the
// writers have drained (nothing pending, every event of the round in
// PostgreSQL or dead-lettered) or timeout passes; it returns the last read
// either way. A writer commits before it acknowledges, so the stock report
// can say confirmed a moment before XPENDING is empty.
func ReadDrained(ctx context.Context, rdb redis.UniversalClient, db *pgxpool.Pool, prefix, sku string, timeout time.Duration) (*Store, error) {
	return ReadDrainedIn(ctx, rdb, db, Layout{Prefix: prefix}, sku, timeout)
}

// ReadDrainedIn is ReadDrained for the keys of l.
func ReadDrainedIn(ctx context.Context, rdb redis.UniversalClient, db *pgxpool.Pool, l Layout, sku string, timeout time.Duration) (*Store, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := ReadStoreIn(ctx, rdb, db, l, sku)
		if err != nil || drained(st) || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// drained: nothing pending, every order event written, and every final
// status Redis holds recorded in PostgreSQL.
func drained(st *Store) bool {
	return len(st.Pending) == 0 && len(unwritten(st)) == 0 && len(unrecorded(st)) == 0
}
