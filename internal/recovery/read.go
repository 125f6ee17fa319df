package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/saga"
	"github.com/shop-oss/shop/internal/order/writer"
)

// The SQL recovery reads with (read only; the tables are inventory's and
// order's). The unit price of a live round is its product's: seeding takes
// it, and a price change updates the live round (Stock.SetPrice).
const (
	liveRoundsSQL = `
SELECT id, sku, quantity, per_user_limit, price_cents, starts_at, ends_at,
       room_admit_per_second, room_pass_ttl_seconds, room_challenge_bits, room_seed, room_secret, draw, buckets FROM (
  SELECT DISTINCT ON (r.sku) r.id, r.sku, r.quantity, r.per_user_limit, p.price_cents, r.starts_at, r.ends_at,
         r.room_admit_per_second, r.room_pass_ttl_seconds, r.room_challenge_bits, r.room_seed, r.room_secret,
         r.draw_closes_at IS NOT NULL AS draw, r.buckets
  FROM sale_rounds r JOIN products p ON p.sku = r.sku
  -- A round whose seeding failed never went live; one that sold did.
  WHERE r.opened_at IS NOT NULL OR EXISTS (SELECT 1 FROM order_items i WHERE i.round_id = r.id)
  ORDER BY r.sku, r.id DESC) latest
WHERE ends_at IS NULL OR ends_at > now() - interval '7 days'
ORDER BY sku`

	// Every line of the live rounds' orders, with the order's recorded
	// final state, if any.
	heldSQL = `
SELECT o.id::text, o.user_id::text, i.round_id, i.quantity, coalesce(t.status, '')
FROM order_items i JOIN orders o ON o.id = i.order_id
LEFT JOIN order_transitions t ON t.order_id = o.id
WHERE i.round_id = ANY($1)`

	transitionsSQL = `SELECT order_id::text, status FROM order_transitions WHERE order_id = ANY($1::uuid[])`

	// The live rounds' orders PostgreSQL holds with no final state, whole.
	confirmedSQL = `
SELECT o.id::text, o.user_id::text, o.total_cents, o.created_at, o.expires_at,
       array_agg(i.sku ORDER BY i.sku), array_agg(i.quantity ORDER BY i.sku),
       array_agg(i.price_cents ORDER BY i.sku), array_agg(i.round_id ORDER BY i.sku)
FROM orders o JOIN order_items i ON i.order_id = o.id
WHERE o.id IN (SELECT order_id FROM order_items WHERE round_id = ANY($1))
  AND NOT EXISTS (SELECT 1 FROM order_transitions t WHERE t.order_id = o.id)
GROUP BY o.id`

	persistedSQL = `SELECT id::text FROM orders WHERE id = ANY($1::uuid[])`

	// The newest stream id PostgreSQL recorded (orders and transitions).
	lastRecordedSQL = `
SELECT stream_id FROM (SELECT stream_id FROM orders UNION ALL SELECT stream_id FROM order_transitions) s
WHERE stream_id ~ '^[0-9]+-[0-9]+$'
ORDER BY split_part(stream_id, '-', 1)::numeric DESC, split_part(stream_id, '-', 2)::numeric DESC
LIMIT 1`
)

// liveRound is a live round as PostgreSQL records it.
type liveRound struct {
	id, quantity int64
	sku          string
	limit        int
	price        int64
	starts, ends time.Time
	room         *inventory.LiveRoom // nil: no waiting room
	draw         bool                // a draw: its hash must come back marked
	buckets      int                 // its stock buckets (docs/design/buckets.md)
}

func (r *Recoverer) liveRounds(ctx context.Context) ([]liveRound, error) {
	rows, err := r.db.Query(ctx, liveRoundsSQL)
	if err != nil {
		return nil, wrap("sale rounds", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (liveRound, error) {
		var lr liveRound
		var starts, ends *time.Time
		var rate, ttl, bits *int
		var seed, secret *string
		err := row.Scan(&lr.id, &lr.sku, &lr.quantity, &lr.limit, &lr.price, &starts, &ends,
			&rate, &ttl, &bits, &seed, &secret, &lr.draw, &lr.buckets)
		if rate != nil && ttl != nil && bits != nil && seed != nil && secret != nil {
			lr.room = &inventory.LiveRoom{
				RoomSettings: inventory.RoomSettings{AdmitPerSecond: *rate, PassTTL: time.Duration(*ttl) * time.Second, ChallengeBits: *bits},
				Seed:         *seed, SeedSHA: inventory.SeedSHA(*seed), Secret: *secret,
			}
		}
		if starts != nil {
			lr.starts = *starts
		}
		if ends != nil {
			lr.ends = *ends
		}
		return lr, err
	})
	if err != nil {
		return nil, wrap("sale rounds", err)
	}
	return out, nil
}

// scan is what the order stream and the dead letters hold: every order
// event and transition, parsed.
type scan struct {
	orders      []writer.Entry // order events, dead-lettered ones included
	transitions []writer.Entry
	ids         map[string]bool // every order id an event names
}

func (r *Recoverer) scanStreams(ctx context.Context) (*scan, error) {
	sc := &scan{ids: map[string]bool{}}
	for _, k := range r.ledger.Partitions() {
		if err := r.readStream(ctx, k.Stream, "", sc); err != nil {
			return nil, err
		}
		if err := r.readStream(ctx, k.Dead, "event_", sc); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// readStream reads a stream whole, in pages; the dead-letter stream keeps
// each event's fields as event_<name>.
func (r *Recoverer) readStream(ctx context.Context, stream, pre string, sc *scan) error {
	for from := "-"; ; {
		msgs, err := r.rdb.XRangeN(ctx, stream, from, "+", 1000).Result()
		if err != nil {
			return wrap("read "+stream, err)
		}
		for _, m := range msgs {
			sc.add(unprefixed(m, pre))
		}
		if len(msgs) < 1000 {
			return nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

func unprefixed(m redis.XMessage, pre string) redis.XMessage {
	if pre == "" {
		return m
	}
	out := redis.XMessage{ID: m.ID, Values: map[string]any{}}
	for k, v := range m.Values {
		if name, ok := strings.CutPrefix(k, pre); ok {
			out.Values[name] = v
		}
	}
	return out
}

func (sc *scan) add(m redis.XMessage) {
	e, err := writer.ParseEntry(m)
	if e.OrderID == "" {
		return // names no order: nothing to count or find
	}
	sc.ids[e.OrderID] = true
	if err != nil {
		return // its lines cannot be read; the writer dead-letters it
	}
	if e.Transition != "" {
		sc.transitions = append(sc.transitions, e)
	} else {
		sc.orders = append(sc.orders, e)
	}
}

// holding is one order's units in one round.
type holding struct {
	user  string
	units int64
	final string // "", paid, cancelled, expired, refunded
	// hold: counted from a standing saga hold, no store naming its order.
	hold bool
}

// readHolds reads every partition's standing holds (a cluster's; none on
// a single Redis), each partition's at one instant.
func (r *Recoverer) readHolds(ctx context.Context) ([]saga.Hold, error) {
	var out []saga.Hold
	for _, k := range r.ledger.Partitions() {
		h, err := r.sagas.ReadHolds(ctx, k)
		if err != nil {
			return nil, wrap("holds", err)
		}
		out = append(out, h...)
	}
	return out, nil
}

func (h *holding) holds() bool {
	return !order.GivenBack(h.final)
}

// heldOrders gathers, per live round, every known order once: PostgreSQL's
// rows first, then the streams' events it lacks, then the lines of the
// standing holds (read before both) whose order neither names; each with
// its final state from PostgreSQL or else the first transition event.
func (r *Recoverer) heldOrders(ctx context.Context, rounds []liveRound, sc *scan, holds []saga.Hold) (map[int64]map[string]*holding, error) {
	out := map[int64]map[string]*holding{}
	ids := make([]int64, len(rounds))
	for i, lr := range rounds {
		ids[i] = lr.id
		out[lr.id] = map[string]*holding{}
	}
	rows, err := r.db.Query(ctx, heldSQL, ids)
	if err != nil {
		return nil, wrap("order lines", err)
	}
	var id, user, final string
	var round, qty int64
	_, err = pgx.ForEachRow(rows, []any{&id, &user, &round, &qty, &final}, func() error {
		out[round][id] = &holding{user: user, units: qty, final: final}
		return nil
	})
	if err != nil {
		return nil, wrap("order lines", err)
	}
	var unwritten []string // orders only the streams hold
	for _, e := range sc.orders {
		for _, it := range e.Items {
			orders, ok := out[it.RoundID]
			if !ok || orders[e.OrderID] != nil {
				continue
			}
			orders[e.OrderID] = &holding{user: e.UserID, units: int64(it.Quantity)}
			unwritten = append(unwritten, e.OrderID)
		}
	}
	addHolds(out, holds)
	finals, err := r.recordedFinals(ctx, unwritten)
	if err != nil {
		return nil, err
	}
	for _, t := range sc.transitions {
		finals[t.OrderID] = order.Final(finals[t.OrderID], t.Transition)
	}
	for _, orders := range out {
		for id, h := range orders {
			if f, ok := finals[id]; ok {
				h.final = order.Final(h.final, f)
			}
		}
	}
	return out, nil
}

// addHolds counts the lines of the standing holds whose order no store
// names in their round: taken by hold.lua, they are the order's if it
// commits (its event then names it, and the hold is dropped, units kept)
// and come back once if it does not (the unhold script's release). An
// order PostgreSQL or a stream names is counted from there alone.
func addHolds(out map[int64]map[string]*holding, holds []saga.Hold) {
	for _, h := range holds {
		for _, it := range h.Items {
			orders, ok := out[it.RoundID]
			if !ok || orders[h.OrderID] != nil {
				continue
			}
			orders[h.OrderID] = &holding{user: h.User, units: int64(it.Quantity), hold: true}
		}
	}
}

// recordedFinals reads the final states PostgreSQL recorded for ids (a
// pending order cancelled before its row was written has one).
func (r *Recoverer) recordedFinals(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := r.db.Query(ctx, transitionsSQL, ids)
	if err != nil {
		return nil, wrap("order transitions", err)
	}
	var id, status string
	if _, err := pgx.ForEachRow(rows, []any{&id, &status}, func() error { out[id] = status; return nil }); err != nil {
		return nil, wrap("order transitions", err)
	}
	return out, nil
}

// rebuild is the round's state from its orders.
func rebuild(lr liveRound, orders map[string]*holding) (inventory.Restored, error) {
	st := inventory.Restored{
		LiveRound: inventory.LiveRound{Round: lr.id, Quantity: lr.quantity, PerUserLimit: lr.limit,
			StartsAt: lr.starts, EndsAt: lr.ends, PriceCents: lr.price, Room: lr.room, Draw: lr.draw},
		Buyers: map[string]int64{},
	}
	var held int64
	for id, h := range orders {
		if h.holds() {
			held += h.units
			st.Buyers[h.user] += h.units
		} else {
			st.Released += h.units
			st.ReleasedOrders = append(st.ReleasedOrders, id)
		}
	}
	slices.Sort(st.ReleasedOrders)
	if held > lr.quantity {
		return st, fmt.Errorf("recover %s: its orders hold %d units of the %d round %d seeded (dead letters count): "+
			"nothing written; see shop audit", lr.sku, held, lr.quantity, lr.id)
	}
	st.Available = lr.quantity - held
	return st, nil
}

func roundReport(lr liveRound, st inventory.Restored, orders map[string]*holding, before string, changed bool) Round {
	rep := Round{SKU: lr.sku, RoundID: lr.id, Quantity: lr.quantity, Available: st.Available,
		Held: lr.quantity - st.Available, Released: st.Released, Orders: len(orders), Buyers: len(st.Buyers),
		Before: before, Changed: changed}
	for _, h := range orders {
		if h.hold && h.holds() {
			rep.HeldByHolds += h.units
		}
	}
	return rep
}

// advance moves every partition's stream's last id past every entry
// PostgreSQL recorded (see ledger.Ledger.AdvanceStream). The newest
// recorded id of any partition will do for each: PostgreSQL does not say
// which partition an entry was in (an order's home is its first line's,
// and its lines are kept by SKU), and an id PostgreSQL recorded is in the
// past, so new entries of every partition are numbered past it anyway.
func (r *Recoverer) advance(ctx context.Context) error {
	var last string
	err := r.db.QueryRow(ctx, lastRecordedSQL).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return wrap("last recorded stream id", err)
	}
	for _, k := range r.ledger.Partitions() {
		if _, err := r.ledger.AdvanceStream(ctx, k, last); err != nil {
			return err
		}
	}
	return nil
}

// lost checks the accepted ids against the streams (scanned before) and
// then PostgreSQL.
func (r *Recoverer) lost(ctx context.Context, sc *scan, accepted []string) ([]Lost, int, error) {
	var candidates []string
	for _, id := range accepted {
		if !sc.ids[id] {
			candidates = append(candidates, id)
		}
	}
	if len(candidates) == 0 {
		return []Lost{}, len(accepted), nil
	}
	rows, err := r.db.Query(ctx, persistedSQL, candidates)
	if err != nil {
		return nil, 0, wrap("persisted orders", err)
	}
	have := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { have[id] = true; return nil }); err != nil {
		return nil, 0, wrap("persisted orders", err)
	}
	out := []Lost{}
	for _, id := range candidates {
		if !have[id] {
			out = append(out, Lost{OrderID: id})
		}
	}
	slices.SortFunc(out, func(a, b Lost) int { return strings.Compare(a.OrderID, b.OrderID) })
	return out, len(accepted), r.statuses(ctx, out)
}

// statuses notes what each lost order's status hash still says.
func (r *Recoverer) statuses(ctx context.Context, lost []Lost) error {
	if len(lost) == 0 {
		return nil
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(lost))
	for i, l := range lost {
		cmds[i] = pipe.HGet(ctx, r.ledger.Keys(0).StatusKey(l.OrderID), "status")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return wrap("order statuses", err)
	}
	for i := range lost {
		lost[i].Status = cmds[i].Val()
	}
	return nil
}

// restoreStatuses gives the live rounds' confirmed orders whose Redis
// status was lost their status back (ledger.Ledger.RestoreStatuses).
func (r *Recoverer) restoreStatuses(ctx context.Context, rounds []liveRound) (int, error) {
	ids := make([]int64, len(rounds))
	for i, lr := range rounds {
		ids[i] = lr.id
	}
	rows, err := r.db.Query(ctx, confirmedSQL, ids)
	if err != nil {
		return 0, wrap("confirmed orders", err)
	}
	confirmed, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Confirmed, error) {
		var c ledger.Confirmed
		var expires *time.Time
		var skus []string
		var qtys []int32
		var prices, roundIDs []int64
		err := row.Scan(&c.OrderID, &c.UserID, &c.TotalCents, &c.CreatedAt, &expires, &skus, &qtys, &prices, &roundIDs)
		if expires != nil {
			c.ExpiresAt = *expires
		}
		for i := range skus {
			c.Items = append(c.Items, order.ReservedItem{SKU: skus[i], Quantity: int(qtys[i]), PriceCents: prices[i], RoundID: roundIDs[i]})
		}
		return c, err
	})
	if err != nil {
		return 0, wrap("confirmed orders", err)
	}
	missing, err := r.withoutStatus(ctx, confirmed)
	if err != nil {
		return 0, err
	}
	return r.ledger.RestoreStatuses(ctx, missing)
}

// withoutStatus keeps the orders whose status hash is gone, looked up in
// pipelines of 1,000.
func (r *Recoverer) withoutStatus(ctx context.Context, orders []ledger.Confirmed) ([]ledger.Confirmed, error) {
	var out []ledger.Confirmed
	for from := 0; from < len(orders); from += 1000 {
		batch := orders[from:min(from+1000, len(orders))]
		pipe := r.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, len(batch))
		for i, o := range batch {
			cmds[i] = pipe.Exists(ctx, r.ledger.Keys(0).StatusKey(o.OrderID))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, wrap("order statuses", err)
		}
		for i, c := range cmds {
			if c.Val() == 0 {
				out = append(out, batch[i])
			}
		}
	}
	return out, nil
}

// restoreSettled brings every partition's settled log (a cluster's: the
// audit's record of the lines taken there for orders homed elsewhere,
// saga.Ledger.ReadSettled) in step with the rounds just rebuilt, for a
// failover may have lost some of a log's entries with the units they
// name, or kept entries of orders it lost. The logs (and holds) are read
// before the streams and PostgreSQL: a drop writes its entry after its
// order's event, so every order a log names is known then, unless the
// failover lost it.
// Each order recover counts as holding units of a partition other than
// its home gets an entry there if it has none; an entry naming a live
// round none of whose orders it is (a lost order) goes. It returns the
// entries written and removed.
func (r *Recoverer) restoreSettled(ctx context.Context, rounds []liveRound) (int, error) {
	if !r.parts.Grouped() || len(rounds) == 0 {
		return 0, nil
	}
	logs := make([]saga.Settled, r.parts.Count())
	for p, k := range r.ledger.Partitions() {
		var err error
		if logs[p], err = r.sagas.ReadSettled(ctx, k); err != nil {
			return 0, err
		}
	}
	sc, err := r.scanStreams(ctx)
	if err != nil {
		return 0, err
	}
	var holds []saga.Hold
	for _, l := range logs {
		holds = append(holds, l.Holds...)
	}
	held, err := r.heldOrders(ctx, rounds, sc, holds)
	if err != nil {
		return 0, err
	}
	changed := 0
	for p, k := range r.ledger.Partitions() {
		add := r.settledToAdd(p, rounds, held, logs[p])
		remove := settledToRemove(held, logs[p])
		if err := r.sagas.RestoreSettled(ctx, k, remove, add); err != nil {
			return changed, err
		}
		changed += len(add) + len(remove)
	}
	return changed, nil
}

// settledToAdd: partition p's held lines of orders homed elsewhere that
// its log and holds do not name, one entry per order.
func (r *Recoverer) settledToAdd(p int, rounds []liveRound, held map[int64]map[string]*holding, log saga.Settled) []saga.SettledEntry {
	by := map[string]*saga.SettledEntry{}
	var ids []string
	for _, lr := range rounds {
		for id, h := range held[lr.id] {
			// A line is held where its buyer's home bucket is (the SKU's
			// partition for a round of one bucket).
			at := r.stock.BucketPartition(lr.sku, inventory.HomeBucket(h.user, lr.buckets), lr.buckets)
			if at != p || !h.holds() || r.parts.Home(id) == p || log.Orders[id] {
				continue
			}
			e := by[id]
			if e == nil {
				e = &saga.SettledEntry{OrderID: id, User: h.user}
				by[id] = e
				ids = append(ids, id)
			}
			e.Items = append(e.Items, order.ReservedItem{SKU: lr.sku, Quantity: int(h.units), RoundID: lr.id})
		}
	}
	slices.Sort(ids)
	out := make([]saga.SettledEntry, len(ids))
	for i, id := range ids {
		out[i] = *by[id]
	}
	return out
}

// settledToRemove: the log's entries with a line in a live round whose
// order no store knows.
func settledToRemove(held map[int64]map[string]*holding, log saga.Settled) []saga.SettledEntry {
	var out []saga.SettledEntry
	for id, entries := range log.Entries {
		for _, e := range entries {
			live, known := false, false
			for _, it := range e.Items {
				if orders, ok := held[it.RoundID]; ok {
					live, known = true, known || orders[id] != nil
				}
			}
			if live && !known {
				out = append(out, e)
			}
		}
	}
	return out
}
