package auth

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"
)

// SessionCheck is one request's session check carried by another call to
// Redis (internal/onetrip's, which runs it with the rate limiter's window
// and, on some routes, the route's first step): the bearer token it
// checks and, once it ran, check.lua's reply. The carrier puts it in the
// request's context (WithSessionCheck), where RequireUser, RequireAdmin
// and OptionalUser read it instead of checking the session themselves.
type SessionCheck struct {
	SessionID, TokenID, Subject string
	// Deferred: the check runs with the route's first Redis step, whose
	// script runs the step only for a session that admits the request
	// (AdmitLua); until then RequireUser admits the token's subject.
	Deferred bool
	// Reply is check.lua's answer, once Ran.
	Reply any
	Ran   bool
}

// SessionCheckOf returns the session check for a request's bearer token,
// or nil when it bears no valid access token (RequireUser refuses it; a
// public route reads anonymously).
func (s *Service) SessionCheckOf(c *fiber.Ctx) *SessionCheck {
	claims, err := s.tokens.parseBearer(c.Get(fiber.HeaderAuthorization))
	if err != nil {
		return nil
	}
	return &SessionCheck{SessionID: claims.SessionID, TokenID: claims.ID, Subject: claims.Subject}
}

// SessionCheckArgs are check.lua's keys and arguments for sc, with the
// token's subject as ARGV[3] for AdmitLua (check.lua reads only its
// first two).
func (s *Service) SessionCheckArgs(sc *SessionCheck) ([]string, []any) {
	keys, args := s.sessions.checkArgs(sc.SessionID, sc.TokenID)
	return keys, append(args, sc.Subject)
}

// User reads the check's reply as RequireUser does: the session's user,
// or an error wrapping ErrUnauthorized when the session is gone,
// superseded or another user's, or has not been checked.
func (sc *SessionCheck) User() (User, error) {
	if !sc.Ran {
		return User{}, fmt.Errorf("%w: the session was not checked", ErrUnauthorized)
	}
	u, err := sessionUser(sc.Reply)
	return ownedBy(u, err, sc.Subject)
}

// answered says whether sc ran for the token with these claims: its
// reply answers for that token.
func (sc *SessionCheck) answered(claims *accessClaims) bool { return sc.isFor(claims) && sc.Ran }

// pending says whether sc is the token's and waits for the route's step.
func (sc *SessionCheck) pending(claims *accessClaims) bool {
	return sc.isFor(claims) && sc.Deferred && !sc.Ran
}

func (sc *SessionCheck) isFor(claims *accessClaims) bool {
	return sc != nil && sc.SessionID == claims.SessionID && sc.TokenID == claims.ID
}

type sessionCheckKey struct{}

// WithSessionCheck returns ctx carrying sc, for the guards to read.
func WithSessionCheck(ctx context.Context, sc *SessionCheck) context.Context {
	return context.WithValue(ctx, sessionCheckKey{}, sc)
}

func sessionCheckFrom(ctx context.Context) *SessionCheck {
	sc, _ := ctx.Value(sessionCheckKey{}).(*SessionCheck)
	return sc
}

// SessionCheckLua is the session check (check.lua). Its KEYS and ARGV are
// SessionCheckArgs's.
func SessionCheckLua() string { return checkLua }

// AdmitLua is the body of a Lua function of (reply, KEYS, ARGV), the
// session check's reply, keys and arguments: it is true for a live session
// ({uid, role, email, name}) of the token's subject (ARGV[3]), exactly
// when SessionCheck.User, given the same reply, returns no error. A
// signed-in route's own step (a purchase's reservation) runs only then.
func AdmitLua() string { return admitLua }

const admitLua = `return type(reply) == 'table' and ARGV[3] ~= nil and ARGV[3] ~= '' and reply[1] == ARGV[3]`
