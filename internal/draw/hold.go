package draw

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/order"
)

// Holds as the provider reports them (docs/design/draws.md, "Webhooks and
// reconcile"): its webhooks and `shop payments reconcile` say what became
// of an entry's intent. The rows follow the provider only forward (an
// authorisation finished by the shopper enters the entry, a hold of an
// entry that ended is released); a word that contradicts a row is
// recorded and counted, never repaired.

// Mismatches recorded in draw_entries.payment_mismatch.
const (
	MismatchSucceededNotWon = "succeeded_not_won"
	MismatchCanceledWon     = "canceled_won"
)

const (
	// An authorisation finished after Enter answered (3-D Secure): under
	// the round's FOR SHARE lock, as Enter records its own, so the close
	// either waits for it (the entry is ranked) or came first (lost).
	heldSQL = `
WITH r AS (SELECT s.id FROM sale_rounds s JOIN draw_entries x ON x.round_id = s.id
           WHERE x.id = $1 AND s.draw_state = 'open' AND now() < s.draw_closes_at FOR SHARE OF s)
UPDATE draw_entries e SET payment_id = $2, payment_status = $3, updated_at = now(),
    state = CASE WHEN EXISTS (SELECT 1 FROM r) THEN 'entered' ELSE 'lost' END
WHERE e.id = $1 AND e.state = 'authorizing' AND e.payment_id IN ('', $2)
RETURNING e.state`

	// A hold found for an entry that ended without knowing of it (a crash
	// between the provider's answer and its record): kept, to be released.
	adoptSQL = `UPDATE draw_entries SET payment_id = $2, payment_status = $3, updated_at = now()
WHERE id = $1 AND payment_id = '' AND state IN ('lost', 'withdrawn', 'failed')`

	holdRowSQL = `SELECT state, payment_id, cancelled_at IS NOT NULL, won_units FROM draw_entries WHERE id = $1`

	mismatchSQL = `UPDATE draw_entries SET payment_mismatch = $2, payment_mismatch_at = now()
WHERE id = $1 AND payment_mismatch = ''`

	// The provider released the hold itself (it lapsed, or was cancelled
	// in its dashboard): nothing is left to cancel.
	releasedSQL = `UPDATE draw_entries SET cancelled_at = now(), payment_status = 'canceled', updated_at = now()
WHERE id = $1 AND payment_id = $2 AND cancelled_at IS NULL AND state IN ('lost', 'withdrawn', 'failed')`
)

// What HoldSeen did, for reconcile's report ("" : nothing).
const (
	SeenEntered  = "entered"
	SeenReleased = "released"
	SeenOrphan   = "released, no entry"
)

// holdRow is what HoldSeen compares the provider's word with.
type holdRow struct {
	state, payment string
	cancelled      bool
	units          int
}

// HoldSeen applies what the provider says of entry entryID's intent p: a
// hold (requires_capture) enters an authorizing entry if its draw is
// open, else the entry is lost; a hold of an entry that ended, or of no
// entry at all (dropped after an unknown outcome), is released with the
// entry's cancel key. A succeeded or canceled intent is compared with the
// row, and a contradiction recorded (Mismatch*). It returns what it did;
// an error leaves it to the next delivery or reconcile.
func (s *Service) HoldSeen(ctx context.Context, entryID string, p order.Payment) (string, error) {
	if _, err := uuid.Parse(entryID); err != nil {
		s.log.Info("draw: an intent of no entry of ours", "entry", entryID, "payment_ref", p.ID)
		return "", nil
	}
	switch p.Status {
	case order.PaymentAuthorized:
		return s.held(ctx, entryID, p)
	case order.PaymentSucceeded, order.PaymentCanceled:
		return s.settled(ctx, entryID, p)
	}
	return "", nil // still with the shopper: the close loses it if it stays so
}

// held records a hold and releases it when its entry cannot use it.
func (s *Service) held(ctx context.Context, entryID string, p order.Payment) (string, error) {
	var state string
	err := s.db.QueryRow(ctx, heldSQL, entryID, p.ID, p.Status).Scan(&state)
	switch {
	case err == nil && state == StateEntered:
		return SeenEntered, nil
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return "", errorf("record a hold", err)
	}
	if _, err := s.db.Exec(ctx, adoptSQL, entryID, p.ID, p.Status); err != nil {
		return "", errorf("record an orphan hold", err)
	}
	row, found, err := s.holdRow(ctx, entryID)
	switch {
	case err != nil:
		return "", err
	case !found: // dropped after an unknown outcome: no entry holds it
		if err := s.release(ctx, entryID, p.ID); err != nil {
			return "", err
		}
		return SeenOrphan, nil
	case row.live() || row.cancelled || row.payment != p.ID:
		return "", nil
	}
	if err := s.cancelOne(ctx, entryID, p.ID); err != nil {
		return "", err
	}
	return SeenReleased, nil
}

// settled compares a succeeded or canceled intent with its entry.
func (s *Service) settled(ctx context.Context, entryID string, p order.Payment) (string, error) {
	row, found, err := s.holdRow(ctx, entryID)
	if err != nil || !found {
		return "", err
	}
	// An entered winner is being captured: its row becomes won next.
	capturing := row.state == StateEntered && row.units > 0
	switch {
	case p.Status == order.PaymentSucceeded && row.state != StateWon && !capturing:
		return s.mismatch(ctx, entryID, p, MismatchSucceededNotWon)
	case p.Status == order.PaymentCanceled && row.state == StateWon:
		return s.mismatch(ctx, entryID, p, MismatchCanceledWon)
	case p.Status == order.PaymentCanceled:
		if _, err := s.db.Exec(ctx, releasedSQL, entryID, p.ID); err != nil {
			return "", errorf("record a release", err)
		}
	}
	return "", nil
}

// mismatch records and reports what the provider and the row disagree
// on; the audit reads the column.
func (s *Service) mismatch(ctx context.Context, entryID string, p order.Payment, kind string) (string, error) {
	s.log.Error("draw: the provider contradicts an entry", "entry", entryID, "payment_ref", p.ID, "mismatch", kind)
	s.metrics.mismatches.WithLabelValues(kind).Inc()
	if _, err := s.db.Exec(ctx, mismatchSQL, entryID, kind); err != nil {
		return "", errorf("record a mismatch", err)
	}
	return "mismatch: " + kind, nil
}

func (s *Service) holdRow(ctx context.Context, entryID string) (holdRow, bool, error) {
	var r holdRow
	err := s.db.QueryRow(ctx, holdRowSQL, entryID).Scan(&r.state, &r.payment, &r.cancelled, &r.units)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, false, nil
	case err != nil:
		return r, false, errorf("read an entry", err)
	}
	return r, true, nil
}

// live: the entry may still be drawn or won, so its hold is kept.
func (r holdRow) live() bool {
	return r.state == StateAuthorizing || r.state == StateEntered || r.state == StateWon
}

func cancelKey(entryID string) string { return "draw:" + entryID + ":cancel" }
