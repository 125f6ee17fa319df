package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The draws' checks read only PostgreSQL, where entries and the draw's
// progress live (docs/design/draws.md): every drawn round's won units
// against the units its orders sold, the units against the round's
// quantity, and each entry's hold settled one way only.

const (
	// Per drawn round: the units its won entries took and the units its
	// orders sold (not given back). A won entry whose order the writer has
	// not persisted yet is left out of both sides within the lag bound:
	// past it, the missing order is the difference.
	drawSoldSQL = `
SELECT r.sku, r.id, r.quantity,
  coalesce((SELECT sum(e.won_units) FROM draw_entries e WHERE e.round_id = r.id AND e.state = 'won'
    AND (e.updated_at < $1 OR EXISTS (SELECT 1 FROM orders o WHERE o.id = e.order_id))), 0),
  coalesce((SELECT sum(e.won_units) FROM draw_entries e WHERE e.round_id = r.id AND e.state = 'won'), 0),
  coalesce((SELECT sum(i.quantity) FROM order_items i LEFT JOIN order_transitions t ON t.order_id = i.order_id
    WHERE i.round_id = r.id AND coalesce(t.status, '') NOT IN ('cancelled', 'expired', 'refunded')), 0)
FROM sale_rounds r WHERE r.draw_state = 'drawn' ORDER BY r.sku, r.id`

	// Entries whose hold was settled both ways, entries that won more
	// than they asked, and, once their round is drawn, losing, failed and
	// withdrawn entries whose hold is still open.
	drawEntriesSQL = `
SELECT CASE WHEN e.captured_cents > 0 AND e.cancelled_at IS NOT NULL THEN 'draw_captured_cancelled'
            WHEN e.won_units > e.quantity THEN 'draw_overwon'
            ELSE 'draw_not_cancelled' END,
       r.sku, r.id, e.id::text, e.state, e.quantity, e.won_units
FROM draw_entries e JOIN sale_rounds r ON r.id = e.round_id
WHERE (e.captured_cents > 0 AND e.cancelled_at IS NOT NULL)
   OR e.won_units > e.quantity
   OR (r.draw_state = 'drawn' AND e.state IN ('lost', 'failed', 'withdrawn') AND e.payment_id <> '' AND e.cancelled_at IS NULL)
ORDER BY r.sku, r.id, e.id
LIMIT 1000`
)

// drawProblems checks every draw (the drawn rounds', and every entry's
// hold), at most 1000 entries named.
func (a *Auditor) drawProblems(ctx context.Context) ([]Problem, error) {
	ctx, cancel := context.WithTimeout(ctx, dbReadTimeout)
	defer cancel()
	out, err := a.drawRounds(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := a.db.Query(ctx, drawEntriesSQL)
	if err != nil {
		return nil, wrap("draw entries", err)
	}
	var kind, sku, id, state string
	var round int64
	var qty, won int
	_, err = pgx.ForEachRow(rows, []any{&kind, &sku, &round, &id, &state, &qty, &won}, func() error {
		out = append(out, Problem{Kind: kind, SKU: sku, RoundID: round, EntryIDs: []string{id},
			Detail: entryDetail(kind, id, state, qty, won)})
		return nil
	})
	if err != nil {
		return nil, wrap("draw entries", err)
	}
	return out, nil
}

func entryDetail(kind, id, state string, qty, won int) string {
	switch kind {
	case "draw_captured_cancelled":
		return fmt.Sprintf("entry %s (%s) has its authorisation both captured and cancelled", id, state)
	case "draw_overwon":
		return fmt.Sprintf("entry %s won %d units of the %d it asked for", id, won, qty)
	}
	return fmt.Sprintf("entry %s is %s in a drawn round and its authorisation was never cancelled", id, state)
}

// drawRounds compares each drawn round's won units with its orders' and
// its quantity.
func (a *Auditor) drawRounds(ctx context.Context) ([]Problem, error) {
	rows, err := a.db.Query(ctx, drawSoldSQL, time.Now().Add(-a.LagBound))
	if err != nil {
		return nil, wrap("drawn rounds", err)
	}
	var out []Problem
	var sku string
	var round, qty, settled, won, sold int64
	_, err = pgx.ForEachRow(rows, []any{&sku, &round, &qty, &settled, &won, &sold}, func() error {
		p := func(kind, format string, args ...any) {
			out = append(out, Problem{Kind: kind, SKU: sku, RoundID: round, Detail: fmt.Sprintf(format, args...)})
		}
		if settled != sold {
			p("draw_sold", "won entries took %d units, the round's orders sold %d", settled, sold)
		}
		if won > qty {
			p("draw_overwon", "won entries took %d units of the round's %d", won, qty)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("drawn rounds", err)
	}
	return out, nil
}
