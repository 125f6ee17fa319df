package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/outage"
)

// pgTimeout bounds each query: a register or login must not hang on a
// PostgreSQL that does not answer.
const pgTimeout = 3 * time.Second

// The SQL the database sees. Emails are matched with lower() on both sides,
// the expression of the unique index users_email_lower_key, so the match is
// PostgreSQL's notion of case and the index serves it.
const (
	insertUserSQL = `
INSERT INTO users (id, email, name, role, password_hash)
VALUES ($1, $2, $3, $4, $5)`

	userByEmailSQL = `
SELECT id::text, email, name, role, password_hash
FROM users
WHERE lower(email) IN (lower($1), lower($2)) AND deleted_at IS NULL
ORDER BY lower(email) = lower($1) DESC
LIMIT 1`
)

// uniqueEmailIndex is the index whose violation means the email is taken.
const uniqueEmailIndex = "users_email_lower_key"

var errUserNotFound = errors.New("no user with this email")

// insertUser stores a new user. It returns ErrEmailTaken when the email
// exists in any letter case.
func (s *Service) insertUser(ctx context.Context, u User, hash string) error {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	_, err := s.db.Exec(ctx, insertUserSQL, u.ID, u.Email, u.Name, u.Role, hash)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == uniqueEmailIndex {
		return fmt.Errorf("insert user: %w", ErrEmailTaken)
	}
	if err != nil {
		return s.pgFailure("insert user", err)
	}
	return nil
}

// userByEmail returns the user and password hash for email (any case), or
// for legacy, its spelling as accounts made before NFKC kept it; or
// errUserNotFound.
func (s *Service) userByEmail(ctx context.Context, email, legacy string) (User, string, error) {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	var u User
	var hash string
	err := s.db.QueryRow(ctx, userByEmailSQL, email, legacy).Scan(&u.ID, &u.Email, &u.Name, &u.Role, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, "", errUserNotFound
	}
	if err != nil {
		return User{}, "", s.pgFailure("find user", err)
	}
	return u, hash, nil
}

// pgFailure classifies a PostgreSQL error: an unreachable, restarting or
// overloaded server is an outage (503); anything else is a bug (500).
func (s *Service) pgFailure(op string, err error) error {
	if !outage.Is(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.log.Warn("postgres unavailable", "op", op, "err", err)
	return fmt.Errorf("%s: %w: %w", op, apperr.Unavailable("the user database is unreachable; retry shortly"), err)
}
