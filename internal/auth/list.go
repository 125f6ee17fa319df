package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/apperr"
)

// Bounds of a page of the user list.
const (
	ListDefaultLimit = 50
	ListMaxLimit     = 500
	maxEmailPrefix   = 254 // the longest email
)

// listUsersSQL pages through the users not erased whose lower-cased email
// starts with $1 (LIKE's wildcards escaped by the caller), by lower(email)
// in byte order (whatever the database's locale) and then id, after the
// cursor's ($2, $3), one row more than asked.
const listUsersSQL = `
SELECT id::text, email, name, role, created_at FROM users
WHERE deleted_at IS NULL AND lower(email) LIKE $1 || '%'
  AND (lower(email) COLLATE "C", id::text) > ($2, $3)
ORDER BY lower(email) COLLATE "C", id::text
LIMIT $4`

// Listed is a user as the admin list shows them.
type Listed struct {
	User
	CreatedAt time.Time `json:"created_at"`
}

// ListPage is a page of users; NextCursor is nil on the last.
type ListPage struct {
	Items      []Listed
	NextCursor *string
}

// listCursor is where a page starts: after this user.
type listCursor struct{ Email, ID string }

// ListUsers returns the users not erased whose email starts with
// emailPrefix in any case ("" for all), by email, after cursor ("" for
// the first page), at most limit (checked by the caller). Errors: an
// invalid_request one naming email or cursor, or a 503.
func (s *Service) ListUsers(ctx context.Context, emailPrefix string, limit int, cursor string) (ListPage, error) {
	after, errs := checkList(emailPrefix, cursor)
	if len(errs) > 0 {
		return ListPage{}, apperr.Invalid(errs...)
	}
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	rows, _ := s.db.Query(ctx, listUsersSQL, likePrefix(strings.ToLower(emailPrefix)), after.Email, after.ID, limit+1)
	users, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Listed, error) {
		var u Listed
		err := r.Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.CreatedAt)
		u.CreatedAt = u.CreatedAt.UTC()
		return u, err
	})
	if err != nil {
		return ListPage{}, s.pgFailure("list users", err)
	}
	return listPage(users, limit), nil
}

func listPage(users []Listed, limit int) ListPage {
	p := ListPage{Items: users}
	if p.Items == nil {
		p.Items = []Listed{}
	}
	if len(users) > limit {
		p.Items = users[:limit]
		last := users[limit-1]
		c := encodeListCursor(listCursor{strings.ToLower(last.Email), last.ID})
		p.NextCursor = &c
	}
	return p
}

// CheckList reports what is wrong with a list's email prefix and cursor.
func CheckList(emailPrefix, cursor string) []apperr.FieldError {
	_, errs := checkList(emailPrefix, cursor)
	return errs
}

func checkList(emailPrefix, cursor string) (listCursor, []apperr.FieldError) {
	var errs []apperr.FieldError
	if len(emailPrefix) > maxEmailPrefix || strings.ContainsFunc(emailPrefix, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		errs = append(errs, apperr.Field("email", "must be at most 254 characters, without control characters"))
	}
	after, ok := decodeListCursor(cursor)
	if !ok {
		errs = append(errs, apperr.Field("cursor", "is not a cursor this list handed out"))
	}
	return after, errs
}

// likePrefix escapes LIKE's wildcards (and its escape character) in p.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p)
}

func encodeListCursor(c listCursor) string {
	b, _ := json.Marshal([]string{c.Email, c.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeListCursor takes back exactly what encodeListCursor makes.
func decodeListCursor(cursor string) (listCursor, bool) {
	if cursor == "" {
		return listCursor{}, true
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	var parts []string
	if err != nil || json.Unmarshal(b, &parts) != nil || len(parts) != 2 {
		return listCursor{}, false
	}
	c := listCursor{parts[0], parts[1]}
	if _, ok := ParseUserID(c.ID); !ok || encodeListCursor(c) != cursor {
		return listCursor{}, false
	}
	return c, true
}
