package draw

import (
	"context"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
)

// Public is a draw's public answer (docs/api.md): its seed and winners'
// digest once drawn, so that anyone holding the entry list can check it.
type Public struct {
	SKU           string    `json:"sku"`
	RoundID       int64     `json:"round_id"`
	State         string    `json:"state"`
	ClosesAt      time.Time `json:"closes_at"`
	Units         int64     `json:"units"`
	Entries       int64     `json:"entries"`
	SeedSHA256    string    `json:"seed_sha256"`
	Seed          *string   `json:"seed"`
	WinnersSHA256 *string   `json:"winners_sha256"`
}

const countEntriesSQL = `SELECT count(*) FROM draw_entries WHERE round_id = $1 AND state <> 'withdrawn'`

// Get returns sku's current draw. Errors: order.ErrProductNotFound,
// ErrNoDraw, or a 503.
func (s *Service) Get(ctx context.Context, sku string) (Public, error) {
	r, err := s.drawOf(ctx, sku, ErrNoDraw)
	if err != nil {
		return Public{}, err
	}
	return s.public(ctx, sku, r)
}

func (s *Service) public(ctx context.Context, sku string, r round) (Public, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	p := Public{SKU: sku, RoundID: r.id, State: r.publicState(), ClosesAt: r.closesAt, Units: r.quantity,
		SeedSHA256: inventory.SeedSHA(r.seed)}
	if err := s.db.QueryRow(ctx, countEntriesSQL, r.id).Scan(&p.Entries); err != nil {
		return Public{}, unavailable("entries", err)
	}
	if r.state == inventory.DrawDrawn {
		seed, winners := r.seed, r.winnersSHA
		p.Seed, p.WinnersSHA256 = &seed, &winners
	}
	return p, nil
}

// Close closes sku's open draw now and runs it. Errors:
// order.ErrProductNotFound, ErrNotClosable, or the draw's error (it
// resumes on the next run).
func (s *Service) Close(ctx context.Context, sku string) (Public, error) {
	r, err := s.drawOf(ctx, sku, ErrNotClosable)
	if err != nil {
		return Public{}, err
	}
	if r.state != inventory.DrawOpen {
		return Public{}, ErrNotClosable
	}
	if err := s.Run(ctx, r.id); err != nil {
		return Public{}, err
	}
	return s.Get(ctx, sku)
}

// AdminEntry is an entry in the admin's list.
type AdminEntry struct {
	ID       string `json:"entry_id"`
	UserID   string `json:"user_id"`
	Quantity int    `json:"quantity"`
	State    string `json:"state"`
	Rank     *int64 `json:"rank"`
}

// AdminPage is a page of the admin's list, with the draw's progress.
type AdminPage struct {
	Items      []AdminEntry `json:"items"`
	NextCursor *string      `json:"next_cursor"`
	Progress   Progress     `json:"progress"`
}

// Progress counts a draw's entries by state, the cents captured and the
// holds still to release, so the console shows a long draw's captures
// settle and its cancels drain at the provider's rate.
type Progress struct {
	Authorizing   int64 `json:"authorizing"`
	Entered       int64 `json:"entered"`
	Won           int64 `json:"won"`
	Lost          int64 `json:"lost"`
	Withdrawn     int64 `json:"withdrawn"`
	Failed        int64 `json:"failed"`
	CapturedCents int64 `json:"captured_cents"`
	Cancelled     int64 `json:"cancelled"`
	CancelsLeft   int64 `json:"cancels_left"`
}

// cancels_left counts by the draw's own rule (cancelLeft), so it reaches 0
// exactly when the draw's cancels are done.
const progressSQL = `
SELECT count(*) FILTER (WHERE state = 'authorizing'), count(*) FILTER (WHERE state = 'entered'),
       count(*) FILTER (WHERE state = 'won'), count(*) FILTER (WHERE state = 'lost'),
       count(*) FILTER (WHERE state = 'withdrawn'), count(*) FILTER (WHERE state = 'failed'),
       coalesce(sum(captured_cents), 0)::bigint, count(*) FILTER (WHERE cancelled_at IS NOT NULL),
       count(*) FILTER (WHERE ` + cancelLeft + `)
FROM draw_entries WHERE round_id = $1`

func (s *Service) progress(ctx context.Context, roundID int64) (Progress, error) {
	var p Progress
	err := s.db.QueryRow(ctx, progressSQL, roundID).Scan(&p.Authorizing, &p.Entered, &p.Won, &p.Lost,
		&p.Withdrawn, &p.Failed, &p.CapturedCents, &p.Cancelled, &p.CancelsLeft)
	if err != nil {
		return Progress{}, unavailable("progress", err)
	}
	return p, nil
}

// In entry order while open; in draw order once ranked (ranks first).
const adminEntriesSQL = `
SELECT id::text, user_id::text, quantity, state, rank FROM draw_entries WHERE round_id = $1
ORDER BY rank NULLS LAST, created_at, id OFFSET $2 LIMIT $3`

// maxOffset bounds a cursor's offset.
const maxOffset = 100_000_000

// ErrBadCursor is a cursor this API did not hand out.
var ErrBadCursor = apperr.Invalid(apperr.FieldError{Field: "cursor", Message: "is not a cursor this API returned"})

// Entries lists sku's current draw's entries for an admin.
func (s *Service) Entries(ctx context.Context, sku string, limit int, cursor string) (AdminPage, error) {
	off, ok := decodeCursor(cursor)
	if !ok {
		return AdminPage{}, ErrBadCursor
	}
	r, err := s.drawOf(ctx, sku, ErrNoDraw)
	if err != nil {
		return AdminPage{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rows, err := s.db.Query(ctx, adminEntriesSQL, r.id, off, limit+1)
	if err != nil {
		return AdminPage{}, unavailable("entries", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AdminEntry, error) {
		var e AdminEntry
		err := row.Scan(&e.ID, &e.UserID, &e.Quantity, &e.State, &e.Rank)
		return e, err
	})
	if err != nil {
		return AdminPage{}, unavailable("entries", err)
	}
	page := AdminPage{Items: items}
	if page.Progress, err = s.progress(ctx, r.id); err != nil {
		return AdminPage{}, err
	}
	if len(items) > limit {
		page.Items = items[:limit]
		next := encodeCursor(off + int64(limit))
		page.NextCursor = &next
	}
	if page.Items == nil {
		page.Items = []AdminEntry{}
	}
	return page, nil
}

// A cursor is the offset of the next page, base64url of "o:<n>".
func encodeCursor(off int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.FormatInt(off, 10)))
}

func decodeCursor(c string) (int64, bool) {
	if c == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || len(b) < 3 || string(b[:2]) != "o:" {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b[2:]), 10, 64)
	if err != nil || n < 0 || n > maxOffset || encodeCursor(n) != c {
		return 0, false
	}
	return n, true
}
