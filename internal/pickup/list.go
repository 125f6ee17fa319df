package pickup

import (
	"context"
	"encoding/base64"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/apperr"
)

// Bounds of a page of the store list.
const (
	ListDefaultLimit = 50
	ListMaxLimit     = 500
)

// listSQL is keyset pagination over the ids, whose "C" collation orders
// them bytewise: the page after the cursor's id, one row more than asked
// to learn whether another page follows.
const listSQL = `SELECT id, name, address, lng, lat FROM stores WHERE id > $1 ORDER BY id LIMIT $2`

// Page is one page of the store list; NextCursor is nil on the last.
type Page struct {
	Items      []Store `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// List returns the stores after cursor ("" for the first page), by id,
// at most limit (the caller has checked it). It returns an
// invalid_request error for a cursor List did not make, or a 503 error.
func (s *Service) List(ctx context.Context, limit int, cursor string) (Page, error) {
	after, ok := decodeListCursor(cursor)
	if !ok {
		return Page{}, apperr.Invalid(badCursor)
	}
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rows, _ := s.db.Query(ctx, listSQL, after, limit+1)
	stores, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Store])
	if err != nil {
		return Page{}, dbError("list stores", err)
	}
	p := Page{Items: stores}
	if p.Items == nil {
		p.Items = []Store{} // an empty list is [], not null
	}
	if len(stores) > limit {
		p.Items = stores[:limit]
		next := base64.RawURLEncoding.EncodeToString([]byte(stores[limit-1].ID))
		p.NextCursor = &next
	}
	return p, nil
}

var badCursor = apperr.Field("cursor", "is not a cursor this list handed out")

// decodeListCursor returns the id a cursor starts after. Only List's exact
// output is a cursor: the decoder alone would take other spellings too.
func decodeListCursor(cursor string) (string, bool) {
	if cursor == "" {
		return "", true
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	id := string(b)
	if err != nil || !ValidID(id) || base64.RawURLEncoding.EncodeToString(b) != cursor {
		return "", false
	}
	return id, true
}
