package draw

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/order"
)

// The draw, in steps whose progress is only in rows (docs/design/draws.md,
// "The draw"): close, rank, allocate, capture, cancel, publish. Each step
// reads its work from the rows, so a second run, on any instance, after
// any crash, continues where the first stopped.

const (
	closeSQL = `UPDATE sale_rounds SET draw_state = 'closed' WHERE id = $1 AND draw_state = 'open'`

	// Entries still authorizing take no part; the rest are ranked, once:
	// after the first run every entered entry has its rank.
	loseAuthorizingSQL = `UPDATE draw_entries SET state = 'lost', updated_at = now()
WHERE round_id = $1 AND state = 'authorizing'`
	rankSQL = `
WITH ranked AS (
  SELECT id, row_number() OVER (ORDER BY sha256(convert_to($2 || ':' || id::text, 'UTF8')), id) AS rank
  FROM draw_entries WHERE round_id = $1 AND state = 'entered')
UPDATE draw_entries e SET rank = ranked.rank, updated_at = now() FROM ranked
WHERE e.id = ranked.id AND NOT EXISTS (SELECT 1 FROM draw_entries x WHERE x.round_id = $1 AND x.rank IS NOT NULL)`

	// The units of the round not yet won.
	unitsLeftSQL = `SELECT r.quantity - coalesce((SELECT sum(won_units) FROM draw_entries WHERE round_id = $1 AND state = 'won'), 0)
  FROM sale_rounds r WHERE r.id = $1`

	// The units each entered rank gets if every capture above it
	// succeeds: the units not yet won, down the ranks as a running sum.
	// Only the first n entered ranks (n units left) can get any, and a
	// rank's units never shrink (a capture takes its own off the top, a
	// failure passes its on down), so the ranks past them keep their 0:
	// the statement reads at most $2 rows (a bound on n read before it; n
	// only shrinks), through draw_entries_entered, not the whole draw.
	allocateSQL = `
WITH left_units AS (` + unitsLeftSQL + `),
alloc AS (
  SELECT quantity, rank, coalesce(sum(quantity) OVER (ORDER BY rank ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS above
  FROM (SELECT quantity, rank FROM draw_entries WHERE round_id = $1 AND state = 'entered' ORDER BY rank LIMIT $2) top)
UPDATE draw_entries e SET won_units = greatest(0, least(a.quantity, l.n - a.above)), updated_at = now()
FROM alloc a, (SELECT * FROM left_units) l(n)
WHERE e.round_id = $1 AND e.state = 'entered' AND e.rank = a.rank AND e.won_units <> greatest(0, least(a.quantity, l.n - a.above))`

	winnerColumns = `SELECT e.id::text, e.user_id::text, e.provider, e.payment_id, e.won_units, r.price_cents, r.sku
FROM draw_entries e JOIN sale_rounds r ON r.id = e.round_id
WHERE e.round_id = $1 AND e.state = 'entered'`
	// The first entered rank: the next winner when it has units (the
	// allocation gives them down from the top), read by its index.
	firstEnteredSQL = winnerColumns + ` ORDER BY e.rank LIMIT 1`
	nextWinnerSQL   = winnerColumns + ` AND e.won_units > 0 ORDER BY e.rank LIMIT 1`

	wonSQL = `UPDATE draw_entries SET state = 'won', captured_cents = $2, payment_status = 'succeeded',
    order_id = $3, updated_at = now() WHERE id = $1 AND state = 'entered'`
	failedSQL = `UPDATE draw_entries SET state = 'failed', won_units = 0, updated_at = now()
WHERE id = $1 AND state = 'entered'`

	// Once every winner is captured, the entered entries left have no units.
	loseRestSQL = `UPDATE draw_entries SET state = 'lost', updated_at = now()
WHERE round_id = $1 AND state = 'entered' AND won_units = 0
  AND NOT EXISTS (SELECT 1 FROM draw_entries x WHERE x.round_id = $1 AND x.state = 'entered' AND x.won_units > 0)`

	// cancelLeft is an entry whose hold the draw has still to release; the
	// partial index draw_entries_to_cancel (migration 00017) has it as its
	// predicate, so keep the two alike.
	cancelLeft = `state IN ('lost', 'withdrawn', 'failed') AND payment_id <> '' AND cancelled_at IS NULL`

	toCancelSQL = `SELECT id::text, payment_id FROM draw_entries
WHERE round_id = $1 AND ` + cancelLeft + `
ORDER BY rank NULLS LAST, created_at, id LIMIT 100`

	cancelledSQL = `UPDATE draw_entries SET cancelled_at = now(), payment_status = 'canceled', updated_at = now()
WHERE id = $1 AND cancelled_at IS NULL`

	winnersSQL = `SELECT id::text FROM draw_entries WHERE round_id = $1 AND state = 'won' ORDER BY rank`

	drawnSQL = `UPDATE sale_rounds SET draw_state = 'drawn', draw_winners_sha256 = $2
WHERE id = $1 AND draw_state = 'closed'`

	orphansSQL = `SELECT id::text FROM draw_entries
WHERE round_id = $1 AND state IN ('lost', 'withdrawn', 'failed') AND payment_id = '' AND cancelled_at IS NULL
  AND provider = $2`

	roundSeedSQL = `SELECT draw_seed, draw_state FROM sale_rounds WHERE id = $1 AND draw_seed IS NOT NULL`
)

// orderNamespace makes a won entry's order id from its entry id (UUID
// v5) when no OrderWriter names it: the same entry always names the same
// order (order.Service.WonOrderID uses the same namespace).
var orderNamespace = uuid.MustParse("4f0e9c1a-5d0b-4d53-9a57-2f1c3e8b7d60")

// OrderID is the id of the order a won entry becomes on a single Redis.
func OrderID(entryID string) string {
	return uuid.NewSHA1(orderNamespace, []byte(entryID)).String()
}

// Run draws round: closes it if it is open, and takes every step the rows
// say is left. It is safe to run again, and on several instances at once
// (each step is guarded by its rows), though the runner's lock keeps it
// to one.
func (s *Service) Run(ctx context.Context, roundID int64) error {
	var seed, state string
	if err := s.db.QueryRow(ctx, roundSeedSQL, roundID).Scan(&seed, &state); err != nil {
		return errorf("read the round", err)
	}
	if state == "drawn" {
		return nil
	}
	if _, err := s.db.Exec(ctx, closeSQL, roundID); err != nil {
		return errorf("close", err)
	}
	if err := s.rank(ctx, roundID, seed); err != nil {
		return err
	}
	if err := s.captureWinners(ctx, roundID); err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, loseRestSQL, roundID); err != nil {
		return errorf("lose the rest", err)
	}
	if err := s.findOrphans(ctx, roundID); err != nil {
		return err
	}
	if err := s.cancelAll(ctx, roundID); err != nil {
		return err
	}
	return s.publish(ctx, roundID)
}

// rank loses the authorizing entries and ranks the entered ones, in one
// transaction: a rerun finds them ranked and changes nothing.
func (s *Service) rank(ctx context.Context, roundID int64, seed string) error {
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, loseAuthorizingSQL, roundID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, rankSQL, roundID, seed)
		return err
	})
	if err != nil {
		return errorf("rank", err)
	}
	return nil
}

// winner is the next entry to capture.
type winner struct {
	id, user, provider, payment, sku string
	units                            int
	price                            int64
}

// captureWinners captures the entered entries with units, in rank
// order. Each is captured only once every rank above it is settled, so
// its allocation is final when it is captured, and its key stays bound
// to one amount.
func (s *Service) captureWinners(ctx context.Context, roundID int64) error {
	for {
		if err := s.allocate(ctx, roundID); err != nil {
			return err
		}
		w, ok, err := s.winnerOf(ctx, firstEnteredSQL, roundID)
		if err == nil && ok && w.units == 0 {
			w, ok, err = s.winnerOf(ctx, nextWinnerSQL, roundID) // none, unless the units are not all at the top
		}
		if err != nil || !ok || w.units == 0 {
			return err
		}
		if err := s.capture(ctx, roundID, w); err != nil {
			return err
		}
	}
}

// allocate runs allocateSQL, planned with its bound as a literal (the
// simple protocol) so that PostgreSQL reads the few top ranks by index
// rather than the whole draw.
func (s *Service) allocate(ctx context.Context, roundID int64) error {
	var bound int64
	if err := s.db.QueryRow(ctx, unitsLeftSQL, roundID).Scan(&bound); err != nil {
		return errorf("units left", err)
	}
	if _, err := s.db.Exec(ctx, allocateSQL, pgx.QueryExecModeSimpleProtocol, roundID, max(bound, 0)); err != nil {
		return errorf("allocate", err)
	}
	return nil
}

// winnerOf reads the entry query names; ok is false when there is none.
func (s *Service) winnerOf(ctx context.Context, query string, roundID int64) (w winner, ok bool, err error) {
	err = s.db.QueryRow(ctx, query, roundID).Scan(&w.id, &w.user, &w.provider, &w.payment, &w.units, &w.price, &w.sku)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, false, nil
	}
	if err != nil {
		return w, false, errorf("next winner", err)
	}
	return w, true, nil
}

// capture captures w's units and records the outcome: won (and its
// order written), or failed, its units going on down the ranks.
func (s *Service) capture(ctx context.Context, roundID int64, w winner) error {
	amount := int64(w.units) * w.price
	p, err := s.pay.Capture(ctx, w.payment, amount, "draw:"+w.id+":capture")
	if errors.Is(err, order.ErrPaymentDeclined) {
		s.metrics.captures.WithLabelValues("declined").Inc()
		if _, err := s.db.Exec(ctx, failedSQL, w.id); err != nil {
			return errorf("record a failed capture", err)
		}
		return nil
	}
	if err != nil {
		s.metrics.captures.WithLabelValues("error").Inc()
		return errorf("capture "+w.id, err)
	}
	s.metrics.captures.WithLabelValues("captured").Inc()
	orderID := OrderID(w.id)
	if s.orders != nil {
		p.AmountCents, p.Status = amount, order.PaymentSucceeded
		won := order.Won{EntryID: w.id, UserID: w.user, SKU: w.sku, Round: roundID, Units: w.units,
			PriceCents: w.price, Payment: p}
		if orderID, err = s.orders.PlaceWon(ctx, won); err != nil {
			return errorf("write the order of "+w.id, err)
		}
	}
	if s.afterCapture != nil {
		if err := s.afterCapture(w.id); err != nil {
			return err
		}
	}
	if _, err := s.db.Exec(ctx, wonSQL, w.id, amount, orderID); err != nil {
		return errorf("record a capture", err)
	}
	return nil
}

// cancelAll releases every hold the draw leaves: lost, withdrawn and
// failed entries' not yet cancelled, at most one per cancelEvery (the
// provider's rate limit, SHOP_DRAW_CANCEL_RATE). It runs once every
// winner is captured, and reads what is left from the rows each batch.
func (s *Service) cancelAll(ctx context.Context, roundID int64) error {
	p, err := s.progress(ctx, roundID)
	if err != nil {
		return err
	}
	s.metrics.pending.Set(float64(p.CancelsLeft))
	defer s.metrics.pending.Set(0) // done, or stopped: the next run counts again
	for {
		batch, err := s.toCancel(ctx, roundID)
		if err != nil || len(batch) == 0 {
			return err
		}
		for _, c := range batch {
			if err := s.cancelOne(ctx, c[0], c[1]); err != nil {
				return err
			}
			s.metrics.pending.Dec()
			if s.cancelEvery > 0 {
				if err := s.pause(ctx, s.cancelEvery); err != nil {
					return err
				}
			}
		}
	}
}

func (s *Service) toCancel(ctx context.Context, roundID int64) ([][2]string, error) {
	rows, err := s.db.Query(ctx, toCancelSQL, roundID)
	if err != nil {
		return nil, errorf("entries to cancel", err)
	}
	var out [][2]string
	var id, payment string
	_, err = pgx.ForEachRow(rows, []any{&id, &payment}, func() error {
		out = append(out, [2]string{id, payment})
		return nil
	})
	if err != nil {
		return nil, errorf("entries to cancel", err)
	}
	return out, nil
}

// cancelOne releases one hold and records it.
func (s *Service) cancelOne(ctx context.Context, entryID, paymentID string) error {
	if err := s.release(ctx, entryID, paymentID); err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, cancelledSQL, entryID); err != nil {
		return errorf("record a cancel", err)
	}
	return nil
}

// release asks the provider to cancel an entry's hold with the entry's
// own cancel key, counted by result; the caller records it where a row
// holds it.
func (s *Service) release(ctx context.Context, entryID, paymentID string) error {
	if err := s.pay.Cancel(ctx, paymentID, cancelKey(entryID)); err != nil {
		s.metrics.cancels.WithLabelValues("error").Inc()
		return errorf("cancel "+entryID, err)
	}
	s.metrics.cancels.WithLabelValues("cancelled").Inc()
	return nil
}

// cancelHold releases an entry's hold outside the draw (a withdrawal);
// a failure is left for the draw's cancels, which retry it.
func (s *Service) cancelHold(ctx context.Context, entryID, paymentID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*dbTimeout)
	defer cancel()
	if err := s.cancelOne(ctx, entryID, paymentID); err != nil {
		s.log.Warn("draw: release a hold; the draw will retry", "entry", entryID, "err", err)
	}
}

// HoldFinder is a provider that can say which hold an authorisation's
// key made (the test provider): the draw then releases the holds whose
// record a crash lost. On Stripe, the intent's webhook or `shop payments
// reconcile` finds them by their metadata instead (HoldSeen).
type HoldFinder interface {
	FindHold(ctx context.Context, key string) (order.Payment, bool, error)
}

// findOrphans looks up, once per run, the holds of the round's ended
// entries that have none recorded, and records those found, for
// cancelAll to release. An entry whose authorisation is still in flight
// is recorded and released by its Enter, which finds it lost.
func (s *Service) findOrphans(ctx context.Context, roundID int64) error {
	finder, ok := s.pay.(HoldFinder)
	if !ok {
		return nil
	}
	rows, err := s.db.Query(ctx, orphansSQL, roundID, s.pay.Name())
	if err != nil {
		return errorf("entries without their hold", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return errorf("entries without their hold", err)
	}
	for _, id := range ids {
		p, found, err := finder.FindHold(ctx, authorizeKey(id))
		if err != nil {
			return errorf("find the hold of "+id, err)
		}
		if !found {
			continue
		}
		if _, err := s.db.Exec(ctx, adoptSQL, id, p.ID, p.Status); err != nil {
			return errorf("record the hold of "+id, err)
		}
	}
	return nil
}

func authorizeKey(entryID string) string { return "draw:" + entryID + ":authorize" }

// publish records winners_sha256 and marks the round drawn.
func (s *Service) publish(ctx context.Context, roundID int64) error {
	rows, err := s.db.Query(ctx, winnersSQL, roundID)
	if err != nil {
		return errorf("winners", err)
	}
	h := sha256.New()
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		fmt.Fprintf(h, "%s\n", id)
		return nil
	}); err != nil {
		return errorf("winners", err)
	}
	if _, err := s.db.Exec(ctx, drawnSQL, roundID, hex.EncodeToString(h.Sum(nil))); err != nil {
		return errorf("mark drawn", err)
	}
	return nil
}
