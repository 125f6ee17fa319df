package draw

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
)

// Entry is an entry as its shopper sees it (docs/api.md).
type Entry struct {
	ID        string         `json:"entry_id"`
	State     string         `json:"state"`
	Quantity  int            `json:"quantity"`
	CreatedAt time.Time      `json:"created_at"`
	OrderID   *string        `json:"order_id"`
	Payment   *order.Payment `json:"payment"`
}

// Enter is a shopper's request to enter a draw.
type Enter struct {
	Quantity int
	Token    string
	IdemKey  string // optional
}

// Entered is Enter's answer: the entry, and whether it is a repeat of an
// earlier request (Replayed), answered 200 instead of 201 or 202.
type Entered struct {
	Entry
	Replayed bool
}

const (
	entryColumns = `e.id::text, e.state, e.quantity, e.created_at, e.order_id::text,
       e.provider, e.payment_id, e.payment_status, e.amount_cents, e.captured_cents, e.client_secret`

	// The round is locked FOR SHARE while an entry is made: the close
	// (UPDATE of the round) waits for it, and an entry made after the
	// close finds the draw no longer open. The batched insertEntriesSQL
	// (entry_batch.go) checks the same rule for many: keep the two alike.
	insertEntrySQL = `
WITH r AS (SELECT id FROM sale_rounds WHERE id = $2 AND draw_state = 'open' AND now() < draw_closes_at
           AND (starts_at IS NULL OR now() >= starts_at) FOR SHARE)
INSERT INTO draw_entries (id, round_id, user_id, quantity, state, amount_cents, provider, idem_key, fingerprint)
SELECT $1, r.id, $3, $4, 'authorizing', $5, $6, $7, $8 FROM r
RETURNING created_at`

	dropEntrySQL = `DELETE FROM draw_entries WHERE id = $1 AND state = 'authorizing' AND payment_id = ''`

	byIdemSQL = `SELECT e.fingerprint, ` + entryColumns + ` FROM draw_entries e WHERE e.user_id = $1 AND e.idem_key = $2`

	// The caller's entry: the live one, else the latest.
	mineSQL = `SELECT ` + entryColumns + ` FROM draw_entries e WHERE e.round_id = $1 AND e.user_id = $2
ORDER BY e.state IN ('authorizing', 'entered', 'won') DESC, e.created_at DESC, e.id LIMIT 1`

	withdrawSQL = `
WITH r AS (SELECT id FROM sale_rounds WHERE id = $1 AND draw_state = 'open' AND now() < draw_closes_at FOR SHARE)
UPDATE draw_entries e SET state = 'withdrawn', updated_at = now() FROM r
WHERE e.round_id = r.id AND e.user_id = $2 AND e.state IN ('authorizing', 'entered')
RETURNING ` + entryColumns
)

// scanEntry reads entryColumns.
func scanEntry(row pgx.Row, extra ...any) (Entry, error) {
	var e Entry
	var p order.Payment
	dest := append(extra, &e.ID, &e.State, &e.Quantity, &e.CreatedAt, &e.OrderID,
		&p.Provider, &p.ID, &p.Status, &p.AmountCents, &p.RefundedCents, &p.ClientSecret)
	if err := row.Scan(dest...); err != nil {
		return Entry{}, err
	}
	e.CreatedAt = e.CreatedAt.UTC()
	captured := p.RefundedCents // the column read here is captured_cents; nothing of an entry is refunded
	p.RefundedCents = 0
	if e.State == StateWon {
		p.AmountCents = captured // the payment is what was taken
	}
	if e.State != StateAuthorizing {
		p.ClientSecret = ""
	}
	if p.ID != "" {
		e.Payment = &p
	}
	return e, nil
}

// fingerprint is what an Idempotency-Key's request asked: a repeat must
// ask the same (docs/api.md, Buying).
func fingerprint(sku string, qty int) string { return sku + " " + strconv.Itoa(qty) }

// Enter enters user in sku's open draw. Errors: order.ErrProductNotFound,
// ErrNotOpen, an invalid_request for a quantity over the limit,
// order.ErrIdempotencyKeyReused, ErrAlreadyEntered, order.ErrDeclined,
// or a 503 (and no entry).
//
// The entry's row is written with others made at once (s.inserts): the
// statement finds the SKU's open draw itself and checks the quantity, so
// a new entry costs no read of its own. A row the statement did not write
// (no open draw, a quantity over the limit, a repeat of an Idempotency-Key,
// the shopper's other entry, or a failed statement) is explained by
// enterOne, which reads and writes as a lone entry does.
func (s *Service) Enter(ctx context.Context, user, sku string, in Enter) (Entered, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Entered{}, errorf("entry id", err)
	}
	row, err := s.inserts.do(ctx, newEntry{id: id.String(), sku: sku, user: user, quantity: in.Quantity,
		idemKey: in.IdemKey, fingerprint: fingerprint(sku, in.Quantity)})
	if err != nil || !row.written {
		if err != nil {
			s.log.Debug("draw: an entry's batch failed; entering alone", "err", err)
		}
		return s.enterOne(ctx, user, sku, in)
	}
	return s.authorize(ctx, row.roundID, row.amount, Entry{ID: id.String(), Quantity: in.Quantity, CreatedAt: row.created}, in)
}

// enterOne is Enter for one entry alone, with each refusal explained.
func (s *Service) enterOne(ctx context.Context, user, sku string, in Enter) (Entered, error) {
	r, err := s.drawOf(ctx, sku, ErrNotOpen)
	if err != nil {
		return Entered{}, err
	}
	if in.IdemKey != "" {
		if e, ok, err := s.replay(ctx, user, in.IdemKey, fingerprint(sku, in.Quantity)); err != nil || ok {
			return e, err
		}
	}
	if r.publicState() != inventory.DrawOpen {
		return Entered{}, ErrNotOpen
	}
	if limit := max(r.limit, 1); in.Quantity > limit {
		return Entered{}, apperr.Invalid(apperr.Field("quantity", "must be an integer from 1 to %d (the draw's limit)", limit))
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Entered{}, errorf("entry id", err)
	}
	created, err := s.insert(ctx, id.String(), user, sku, r, in)
	if err != nil {
		return s.insertFailed(ctx, user, sku, in, err)
	}
	return s.authorize(ctx, r.id, int64(in.Quantity)*r.price, Entry{ID: id.String(), Quantity: in.Quantity, CreatedAt: created}, in)
}

// insert makes the entry's row, authorizing, holding the shopper's place.
func (s *Service) insert(ctx context.Context, id, user, sku string, r round, in Enter) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var key *string
	if in.IdemKey != "" {
		key = &in.IdemKey
	}
	var created time.Time
	err := s.db.QueryRow(ctx, insertEntrySQL, id, r.id, user, in.Quantity, int64(in.Quantity)*r.price,
		s.pay.Name(), key, fingerprint(sku, in.Quantity)).Scan(&created)
	if errors.Is(err, pgx.ErrNoRows) {
		return created, ErrNotOpen // closed since it was read
	}
	return created.UTC(), err
}

// insertFailed explains a refused insert: the shopper's other entry, or
// a racing repeat of the same Idempotency-Key (answered like a repeat).
func (s *Service) insertFailed(ctx context.Context, user, sku string, in Enter, err error) (Entered, error) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.ConstraintName != "draw_entries_one_per_shopper" && pe.ConstraintName != "draw_entries_idem" {
		if isAPIError(err) {
			return Entered{}, err
		}
		return Entered{}, unavailable("record the entry", err)
	}
	// Either index may answer first when a repeat of the same key races
	// the first request: it is the first request's entry, committed now.
	if in.IdemKey != "" {
		if e, ok, err := s.replay(ctx, user, in.IdemKey, fingerprint(sku, in.Quantity)); err != nil || ok {
			return e, err
		}
	}
	return Entered{}, ErrAlreadyEntered // (or the racer's entry was dropped since: declined)
}

// replay answers an earlier entry made with the same Idempotency-Key.
func (s *Service) replay(ctx context.Context, user, key, fp string) (Entered, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var was string
	e, err := scanEntry(s.db.QueryRow(ctx, byIdemSQL, user, key), &was)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Entered{}, false, nil
	case err != nil:
		return Entered{}, false, unavailable("idempotency key", err)
	case was != fp:
		return Entered{}, false, order.ErrIdempotencyKeyReused
	}
	return Entered{Entry: e, Replayed: true}, true, nil
}

// authorize asks the provider to hold the entry's amount and records its
// answer. A declined card or an unknown outcome drops the entry: no
// entry without its authorisation.
func (s *Service) authorize(ctx context.Context, roundID, amount int64, e Entry, in Enter) (Entered, error) {
	p, err := s.pay.Authorize(ctx, order.Charge{Key: authorizeKey(e.ID), OrderID: e.ID,
		AmountCents: amount, Token: in.Token})
	if err != nil {
		s.drop(ctx, e.ID)
		if errors.Is(err, order.ErrPaymentDeclined) {
			s.metrics.entries.WithLabelValues("declined").Inc()
			return Entered{}, order.ErrDeclined
		}
		s.metrics.entries.WithLabelValues("failed").Inc()
		return Entered{}, errorf("authorize", errors.Join(apperr.Unavailable("the payment provider is unavailable; retry"), err))
	}
	if s.afterAuthorize != nil {
		if err := s.afterAuthorize(e.ID); err != nil {
			return Entered{}, err
		}
	}
	got, err := s.authorized.do(ctx, authorization{entryID: e.ID, roundID: roundID, payment: p})
	if err == nil && got.ID == "" {
		err = errors.New("the entry's row is gone")
	}
	if err != nil {
		return Entered{}, unavailable("record the authorisation", err)
	}
	if got.State == StateLost || got.State == StateWithdrawn { // the close or a withdrawal came first: release the hold
		s.metrics.entries.WithLabelValues("lost_late").Inc()
		s.cancelHold(ctx, got.ID, p.ID)
		return Entered{}, ErrNotOpen
	}
	s.metrics.entries.WithLabelValues(got.State).Inc()
	return Entered{Entry: got}, nil
}

// drop deletes an entry whose authorisation failed, freeing the
// shopper's place. A failure leaves it authorizing: the draw makes it lost.
func (s *Service) drop(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	defer cancel()
	if _, err := s.db.Exec(ctx, dropEntrySQL, id); err != nil {
		s.log.Warn("draw: drop an unauthorised entry", "entry", id, "err", err)
	}
}

// Mine returns user's entry in sku's current draw. Errors:
// order.ErrProductNotFound, ErrNoEntry, or a 503.
func (s *Service) Mine(ctx context.Context, user, sku string) (Entry, error) {
	r, err := s.drawOf(ctx, sku, ErrNoEntry)
	if err != nil {
		return Entry{}, err
	}
	return s.mine(ctx, r.id, user)
}

func (s *Service) mine(ctx context.Context, roundID int64, user string) (Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	e, err := scanEntry(s.db.QueryRow(ctx, mineSQL, roundID, user))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Entry{}, ErrNoEntry
	case err != nil:
		return Entry{}, unavailable("entry", err)
	}
	return e, nil
}

// Withdraw withdraws user's entry from sku's open draw and releases its
// authorisation. A withdrawn entry is answered as it is. Errors:
// order.ErrProductNotFound, ErrNoEntry, ErrClosed, or a 503.
func (s *Service) Withdraw(ctx context.Context, user, sku string) (Entry, error) {
	r, err := s.drawOf(ctx, sku, ErrNoEntry)
	if err != nil {
		return Entry{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, dbTimeout)
	e, err := scanEntry(s.db.QueryRow(wctx, withdrawSQL, r.id, user))
	cancel()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s.notWithdrawn(ctx, r, user)
	case err != nil:
		return Entry{}, unavailable("withdraw", err)
	}
	if e.Payment != nil {
		s.cancelHold(ctx, e.ID, e.Payment.ID)
		e.Payment.Status = order.PaymentCanceled
	}
	return e, nil
}

// notWithdrawn explains a withdrawal that changed nothing: no entry, a
// closed draw, or an entry withdrawn already (answered as it is).
func (s *Service) notWithdrawn(ctx context.Context, r round, user string) (Entry, error) {
	e, err := s.mine(ctx, r.id, user)
	switch {
	case err != nil:
		return Entry{}, err
	case e.State == StateWithdrawn:
		return e, nil
	}
	return Entry{}, ErrClosed
}

func isAPIError(err error) bool {
	var e *apperr.Error
	return errors.As(err, &e)
}
