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

var (
	// ErrUserNotFound: no user has the id, or it was erased already.
	ErrUserNotFound = apperr.NewError(apperr.CodeNotFound, "user not found")
	// ErrUserErased: the user was erased already; it is an ErrUserNotFound.
	ErrUserErased = fmt.Errorf("%w: erased already", ErrUserNotFound)
)

const (
	// eraseUserSQL also answers for a user erased already (erased false),
	// so that a repeated erasure can finish what a failed one left.
	eraseUserSQL = `
WITH erased AS (
UPDATE users SET email = 'deleted+' || id || '@invalid', name = '', password_hash = '',
       deleted_at = now(), updated_at = now()
WHERE id = $1 AND deleted_at IS NULL
RETURNING id)
SELECT EXISTS (SELECT 1 FROM erased), EXISTS (SELECT 1 FROM users WHERE id = $1)`

	liveUserSQL = `SELECT deleted_at IS NULL FROM users WHERE id = $1`
)

// EraseUser erases user id (docs/api.md: any case, with or without dashes): the
// row stays for their orders, anonymised, and every session of theirs is
// revoked, so their tokens answer 401 at once. It returns the id in its
// canonical form. A user erased already has their sessions revoked again
// (a failed revocation is finished by the next try) and answers
// ErrUserErased. Errors: ErrUserNotFound (ErrUserErased is one), or a 503.
func (s *Service) EraseUser(ctx context.Context, id string) (string, error) {
	uid, ok := ParseUserID(id)
	if !ok {
		return "", fmt.Errorf("erase user %q: %w", id, ErrUserNotFound)
	}
	pctx, cancel := context.WithTimeout(ctx, pgTimeout)
	var erased, exists bool
	err := s.db.QueryRow(pctx, eraseUserSQL, uid).Scan(&erased, &exists)
	cancel()
	if err != nil {
		return "", s.pgFailure("erase user", err)
	}
	if !exists {
		return "", fmt.Errorf("erase user %s: %w", uid, ErrUserNotFound)
	}
	// A login that read the account before the erasure committed checks
	// it again once its session exists (stillLive), so this scan, which
	// starts after the commit, misses no session of theirs.
	if err := s.sessions.revokeUser(ctx, uid); err != nil {
		return "", err
	}
	if !erased {
		return uid, fmt.Errorf("erase user %s: %w", uid, ErrUserErased)
	}
	return uid, nil
}

// ParseUserID returns id in the canonical form users are stored under
// (lower case, with dashes) when it is a user id in any case, with or
// without its dashes; ok is false for anything else. uuid.Parse alone
// would also take the URN and braced forms, which are not our ids.
func ParseUserID(id string) (canonical string, ok bool) {
	if len(id) != 36 && len(id) != 32 {
		return "", false
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return "", false
	}
	return u.String(), true
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
