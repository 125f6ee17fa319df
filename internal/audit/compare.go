package audit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
)

// held is one order's units in one round as PostgreSQL (and the stream's
// unrecorded entries) tell.
type held struct {
	user  string
	units int64
	final string // "", paid, cancelled, expired
}

// postgresHeld builds, per round, the orders PostgreSQL records up to the
// snapshot's last entry, completed by the entries the snapshot holds
// unrecorded (pending or undelivered): each order counted once.
func postgresHeld(s snap, rows []heldRow) map[int64]map[string]*held {
	out := map[int64]map[string]*held{}
	for _, l := range s.live {
		out[l.round] = map[string]*held{}
	}
	for _, r := range rows {
		if r.stream.after(s.last) {
			continue // accepted after the snapshot
		}
		h := &held{user: r.userID, units: r.qty}
		if r.final != "" && !r.finalStream.after(s.last) {
			h.final = r.final
		}
		out[r.round][r.orderID] = h
	}
	for _, e := range append(append([]streamEntry(nil), s.pending...), s.undelivered...) {
		applyEntry(out, e)
	}
	return out
}

func applyEntry(out map[int64]map[string]*held, e streamEntry) {
	if e.msg == nil {
		return // missing from the stream: reported on its own
	}
	ent, err := order.ParseEntry(*e.msg)
	if err != nil {
		return // the writer dead-letters it; reported then
	}
	for _, it := range ent.Items {
		orders, ok := out[it.RoundID]
		if !ok {
			continue
		}
		h := orders[ent.OrderID]
		if h == nil {
			h = &held{user: ent.UserID, units: int64(it.Quantity)}
			orders[ent.OrderID] = h
		}
		if ent.Transition != "" && h.final == "" {
			h.final = ent.Transition
		}
	}
}

func (h *held) holds() bool {
	return h.final != order.StatusCancelled && h.final != order.StatusExpired
}

// compareRounds checks every live round on both sides, buyer by buyer.
func compareRounds(s snap, rows []heldRow, quantities map[int64]int64) ([]Round, []Problem) {
	byRound := postgresHeld(s, rows)
	var rounds []Round
	var problems []Problem
	for _, l := range s.live {
		r := Round{SKU: l.sku, RoundID: l.round, Quantity: l.quantity, Available: l.avail, Released: l.given}
		for _, n := range l.buyers {
			r.HeldRedis += n
		}
		perUser, ordersOf := map[string]int64{}, map[string][]string{}
		for id, h := range byRound[l.round] {
			ordersOf[h.user] = append(ordersOf[h.user], id)
			if h.holds() {
				perUser[h.user] += h.units
				r.HeldPostgres += h.units
			}
		}
		rounds = append(rounds, r)
		problems = append(problems, roundProblems(r, l, quantities)...)
		problems = append(problems, buyerProblems(r, l.buyers, perUser, ordersOf)...)
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
	if r.Quantity != r.Available+r.HeldRedis {
		p("stock_redis", "quantity %d != available %d + %d units held by the buyer counts", r.Quantity, r.Available, r.HeldRedis)
	}
	if r.Quantity != r.Available+r.HeldPostgres {
		p("stock_postgres", "quantity %d != available %d + %d units held by orders in PostgreSQL and the stream",
			r.Quantity, r.Available, r.HeldPostgres)
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
	slices.SortFunc(out, func(a, b Problem) int { return compareStrings(a.Detail, b.Detail) })
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// streamProblems: pending entries gone from the stream, a backlog too long
// to audit, dead letters, and accepted orders PostgreSQL lacks.
func (a *Auditor) streamProblems(ctx context.Context, s snap) ([]Problem, error) {
	var out []Problem
	for _, e := range s.pending {
		if e.msg == nil {
			out = append(out, Problem{Kind: "pending_missing",
				Detail: fmt.Sprintf("entry %s is pending for the writers but gone from the stream", e.id)})
		}
	}
	if s.truncated {
		out = append(out, Problem{Kind: "backlog", Detail: fmt.Sprintf("over %d stream entries unrecorded", maxEntries)})
	}
	dead, err := a.deadLetters(ctx)
	if err != nil {
		return nil, err
	}
	missing, err := a.notPersisted(ctx)
	if err != nil {
		return nil, err
	}
	return append(append(out, dead...), missing...), nil
}

func (a *Auditor) deadLetters(ctx context.Context) ([]Problem, error) {
	msgs, err := a.rdb.XRangeN(ctx, a.keys.Dead, "-", "+", 1000).Result()
	if err != nil {
		return nil, wrap("dead letters", err)
	}
	out := make([]Problem, 0, len(msgs))
	for _, m := range msgs {
		id, _ := m.Values["event_order_id"].(string)
		p := Problem{Kind: "dead_letter", Detail: fmt.Sprintf("entry %v dead-lettered: %v", m.Values["source_id"], m.Values["reason"])}
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

// oldOrders scans the status hashes for orders created before cutoff (ms).
func (a *Auditor) oldOrders(ctx context.Context, cutoff int64) ([]string, error) {
	var out []string
	prefixLen := len(a.keys.StatusKey(""))
	iter := a.rdb.Scan(ctx, 0, a.keys.StatusPattern, 1000).Iterator()
	var batch []string
	flush := func() error {
		pipe := a.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.HGetAll(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for i, c := range cmds {
			status, created := order.LiveStatus(c.Val())
			if status != "" && status != order.StatusRejected && created > 0 && created < cutoff {
				out = append(out, batch[i][prefixLen:])
			}
		}
		batch = batch[:0]
		return nil
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			if err := flush(); err != nil {
				return nil, wrap("order statuses", err)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return nil, wrap("order statuses", err)
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return nil, wrap("order statuses", err)
		}
	}
	return out, nil
}
