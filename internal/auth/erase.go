package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/database"
)

// ErrUserNotFound: no user has the id, or it was erased already.
var ErrUserNotFound = apperr.NewError(apperr.CodeNotFound, "user not found")

const (
	eraseUserSQL = `
UPDATE users SET email = 'deleted+' || id || '@invalid', name = '', password_hash = '',
       deleted_at = now(), updated_at = now()
WHERE id = $1 AND deleted_at IS NULL`

	liveUserSQL = `SELECT deleted_at IS NULL FROM users WHERE id = $1`
)

// EraseUser erases a user (a GDPR erasure): the row stays for their
// orders, anonymised, and every session of theirs is revoked, so their
// tokens answer 401 at once. Errors: ErrUserNotFound, or a 503.
func (s *Service) EraseUser(ctx context.Context, id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return fmt.Errorf("erase user %q: %w", id, ErrUserNotFound)
	}
	pctx, cancel := context.WithTimeout(ctx, pgTimeout)
	tag, err := s.db.Exec(pctx, eraseUserSQL, id)
	cancel()
	if err != nil {
		return s.pgFailure("erase user", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("erase user %s: %w", id, ErrUserNotFound)
	}
	// A login that read the account before the erasure committed checks
	// it again once its session exists (stillLive), so this scan, which
	// starts after the commit, misses no session of theirs.
	return s.sessions.revokeUser(ctx, id)
}

// stillLive reports whether the user was not erased; a login asks after
// making its session (see EraseUser).
func (s *Service) stillLive(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	var live bool
	err := s.db.QueryRow(ctx, liveUserSQL, id).Scan(&live)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.pgFailure("check user", err)
	}
	return live, nil
}

// revokeUser deletes every session of user id: a SCAN of the session
// keys (on every master of a cluster), an admin's rare and slow path.
func (st *sessionStore) revokeUser(ctx context.Context, id string) error {
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, st.prefix+"session:*", 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			uid, err := c.HGet(ctx, key, fieldUser).Result()
			if errors.Is(err, redis.Nil) || err == nil && uid != id {
				continue
			}
			if err == nil {
				err = c.Del(ctx, key).Err()
			}
			if err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if err := database.OnEveryServer(ctx, st.rdb, scan); err != nil {
		return st.failure("revoke the user's sessions", err)
	}
	return nil
}

// afterLogin revokes the new session g when u was erased while logging in,
// answering as for an unknown account.
func (s *Service) afterLogin(ctx context.Context, u User, g grant) error {
	if s.beforeLiveCheck != nil {
		s.beforeLiveCheck()
	}
	live, err := s.stillLive(ctx, u.ID)
	if err == nil && live {
		return nil
	}
	if rerr := s.sessions.revoke(ctx, g.sid); rerr != nil {
		return rerr
	}
	if err != nil {
		return err
	}
	return ErrInvalidCredentials
}

// UserID returns the id of the live account with email (any case), for
// an operator who knows the email. Errors: ErrUserNotFound, or a 503.
func (s *Service) UserID(ctx context.Context, email string) (string, error) {
	u, _, err := s.userByEmail(ctx, normalizeEmail(email), legacyEmail(email))
	if errors.Is(err, errUserNotFound) {
		return "", fmt.Errorf("user %q: %w", email, ErrUserNotFound)
	}
	return u.ID, err
}
