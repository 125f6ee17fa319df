package draw

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/order"
)

// The two writes of every entry, each batched (batch): the entry's row,
// authorizing, before the provider is asked, and the provider's answer
// after. Both statements keep the rules of the lone entry's: the round
// is locked FOR SHARE while they run, so the close waits for them and an
// entry written after it finds the draw no longer open.

// entryBatchSize bounds the entries of one statement; entryFlushers is
// how many statements of each kind may run at once. One: each statement
// and commit costs PostgreSQL far more than a row, and a second flusher
// only split the same entries into smaller statements (about 4 rows
// instead of 7 in make bench-draw); entries/s rose from about 2,060 to
// 2,550 with one.
const entryBatchSize, entryFlushers = 64, 1

// newEntry is an entry's row to write.
type newEntry struct {
	id, sku, user        string
	quantity             int
	idemKey, fingerprint string
}

// insertedEntry is the row written, or written false: the statement
// did not write it (Enter asks enterOne why).
type insertedEntry struct {
	written         bool
	roundID, amount int64
	created         time.Time
}

// insertEntriesSQL writes each entry of a SKU whose current round is an
// open draw, with a quantity within its limit, unless a unique index
// refuses it (the shopper's live entry, a repeated Idempotency-Key).
const insertEntriesSQL = `
WITH v AS (
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::int[], $5::text[], $6::text[])
    AS v(id, sku, user_id, quantity, idem_key, fingerprint)),
cur AS (
  SELECT DISTINCT ON (r.sku) r.id FROM sale_rounds r
  WHERE r.sku IN (SELECT sku FROM v) AND r.opened_at IS NOT NULL ORDER BY r.sku, r.id DESC),
open AS (
  SELECT r.id, r.sku, r.price_cents, r.per_user_limit FROM sale_rounds r
  WHERE r.id IN (SELECT id FROM cur) AND r.draw_state = 'open' AND now() < r.draw_closes_at
    AND (r.starts_at IS NULL OR now() >= r.starts_at)
  FOR SHARE)
INSERT INTO draw_entries (id, round_id, user_id, quantity, state, amount_cents, provider, idem_key, fingerprint)
SELECT v.id, o.id, v.user_id, v.quantity, 'authorizing', v.quantity * o.price_cents, $7, nullif(v.idem_key, ''), v.fingerprint
FROM v JOIN open o ON o.sku = v.sku
WHERE v.quantity BETWEEN 1 AND greatest(o.per_user_limit, 1)
ON CONFLICT DO NOTHING
RETURNING id::text, round_id, amount_cents, created_at`

func (s *Service) insertEntries(ctx context.Context, ins []newEntry) ([]insertedEntry, error) {
	n := len(ins)
	ids, skus, users, keys, prints := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	qty := make([]int32, n)
	for i, e := range ins {
		ids[i], skus[i], users[i], qty[i], keys[i], prints[i] = e.id, e.sku, e.user, int32(e.quantity), e.idemKey, e.fingerprint
	}
	rows, err := s.db.Query(ctx, insertEntriesSQL, ids, skus, users, qty, keys, prints, s.pay.Name())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	written := make(map[string]insertedEntry, n)
	for rows.Next() {
		var id string
		e := insertedEntry{written: true}
		if err := rows.Scan(&id, &e.roundID, &e.amount, &e.created); err != nil {
			return nil, err
		}
		e.created = e.created.UTC()
		written[id] = e
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]insertedEntry, n)
	for i, id := range ids {
		out[i] = written[id]
	}
	return out, nil
}

// authorization is the provider's answer for an entry, to record.
type authorization struct {
	entryID string
	roundID int64
	payment order.Payment
}

// authorizedSQL records one answer. An authorisation that comes back
// after the close makes its entry lost (the draw ranked without it); an
// entry no longer authorizing (withdrawn meanwhile) keeps its state.
const authorizedSQL = `
WITH r AS (SELECT id FROM sale_rounds WHERE id = $2 AND draw_state = 'open' AND now() < draw_closes_at FOR SHARE)
UPDATE draw_entries e SET payment_id = $3, payment_status = $4, client_secret = $5, updated_at = now(),
    state = CASE WHEN e.state <> 'authorizing' THEN e.state
                 WHEN NOT EXISTS (SELECT 1 FROM r) THEN 'lost'
                 WHEN $4 = 'requires_capture' THEN 'entered' ELSE 'authorizing' END
WHERE e.id = $1 RETURNING ` + entryColumns

// recordAuthorizations records each answer with a statement of its own
// by the primary key, all sent at once and committed together. One
// statement joining the batch's arrays to draw_entries was planned, once
// cached, as a full scan of the table; planned afresh each time, it was
// no faster than these updates (its planning cost what they save).
func (s *Service) recordAuthorizations(ctx context.Context, as []authorization) ([]Entry, error) {
	var b pgx.Batch
	for _, a := range as {
		b.Queue(authorizedSQL, a.entryID, a.roundID, a.payment.ID, a.payment.Status, a.payment.ClientSecret)
	}
	res := s.db.SendBatch(ctx, &b)
	defer res.Close()
	out := make([]Entry, len(as))
	for i := range as {
		e, err := scanEntry(res.QueryRow())
		switch {
		case errors.Is(err, pgx.ErrNoRows): // the row is gone (ID ""), which authorize reports
		case err != nil:
			return nil, err
		}
		out[i] = e
	}
	return out, res.Close()
}
