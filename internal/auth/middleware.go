package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"
)

// ctxKey keys the authenticated principal in a request's context.
type ctxKey struct{}

// principal is who a request acts for: the user, and the session its token
// belongs to (logout needs it).
type principal struct {
	user      User
	sessionID string
}

// NewContextWithUser returns ctx carrying u as the authenticated user.
func NewContextWithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, ctxKey{}, principal{user: u})
}

// UserFromContext returns the authenticated user, if ctx carries one.
func UserFromContext(ctx context.Context) (User, bool) {
	p, ok := ctx.Value(ctxKey{}).(principal)
	return p.user, ok
}

// MustUser returns the user that RequireUser or RequireAdmin put in the
// request's context. It panics when there is none: the route was mounted
// without the middleware, a bug the recover middleware answers with a 500.
func MustUser(c *fiber.Ctx) User {
	u, ok := UserFromContext(c.UserContext())
	if !ok {
		panic("auth.MustUser: no user in the request context; mount the route behind RequireUser")
	}
	return u
}

// RequireUser admits requests with a valid bearer access token of a live
// session and puts the user in c.UserContext(). Otherwise it answers 401
// unauthorized, or 503 when Redis does not answer.
func (s *Service) RequireUser() fiber.Handler { return s.require("") }

// RequireAdmin is RequireUser for admins only: an authenticated user of
// another role gets 403 forbidden. The role is the session's, so a change
// of role written to the session applies at once.
func (s *Service) RequireAdmin() fiber.Handler { return s.require(RoleAdmin) }

// OptionalUser is for public routes that want to know who is asking: it
// puts the user in c.UserContext() when the request bears a valid access
// token of a live session, and lets every request through, leaving it
// anonymous when the token is missing, bad or revoked, or when the
// session store does not answer. The session check is the one that rode
// with the rate limiter's window when there was one; otherwise it costs a
// round trip, for requests that bear a token only. When the check waits
// for the route's own first Redis step the request goes on anonymous, and
// whoever runs that step names the user (internal/onetrip).
func (s *Service) OptionalUser() fiber.Handler {
	return func(c *fiber.Ctx) error {
		claims, err := s.tokens.parseBearer(c.Get(fiber.HeaderAuthorization))
		if err != nil {
			return c.Next()
		}
		sc := sessionCheckFrom(c.UserContext())
		if sc.pending(claims) {
			return c.Next()
		}
		if p, err := s.authenticate(c.UserContext(), claims, sc); err == nil {
			c.SetUserContext(context.WithValue(c.UserContext(), ctxKey{}, p))
		}
		return c.Next()
	}
}

func (s *Service) require(role string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p, err := s.principalOf(c, role)
		if err != nil {
			s.log.Debug("request not authenticated", "err", err)
			return err
		}
		if role != "" && p.user.Role != role {
			return ErrForbidden
		}
		c.SetUserContext(context.WithValue(c.UserContext(), ctxKey{}, p))
		return c.Next()
	}
}

// principalOf is who c acts for: the subject of a token whose session
// check waits for the route's step (RequireUser only), else the user of
// its checked session.
func (s *Service) principalOf(c *fiber.Ctx, role string) (principal, error) {
	claims, err := s.tokens.parseBearer(c.Get(fiber.HeaderAuthorization))
	if err != nil {
		return principal{}, err
	}
	sc := sessionCheckFrom(c.UserContext())
	if role == "" && sc.pending(claims) {
		return admitPending(claims), nil
	}
	return s.authenticate(c.UserContext(), claims, sc)
}

// authenticate checks the session a verified token names: one Redis round
// trip, or none when sc holds the answer of the session check for this
// very token. It returns an error wrapping ErrUnauthorized, or an
// api.Unavailable error.
func (s *Service) authenticate(ctx context.Context, claims *accessClaims, sc *SessionCheck) (principal, error) {
	var u User
	var err error
	if sc.answered(claims) {
		u, err = sc.User()
	} else {
		u, err = s.sessions.lookup(ctx, claims.SessionID, claims.ID)
		u, err = ownedBy(u, err, claims.Subject)
	}
	if err != nil {
		return principal{}, err
	}
	return principal{user: u, sessionID: claims.SessionID}, nil
}

// ownedBy reads a session check's answer (u, err) for a token of
// subject: the session's user, or an error wrapping ErrUnauthorized when
// the session is gone or superseded. The session is the authority: a
// token naming another user's session (which only a leaked key could
// sign) gets nothing of either.
func ownedBy(u User, err error, subject string) (User, error) {
	if errors.Is(err, errSessionGone) {
		return User{}, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	if err != nil {
		return User{}, err
	}
	if u.ID != subject {
		return User{}, fmt.Errorf("%w: token subject does not own session", ErrUnauthorized)
	}
	return u, nil
}

// admitPending lets a request whose session check waits for the route's
// first Redis step reach its route as the token's subject: that step's
// script runs the check first and refuses a revoked session (AdmitLua),
// and its carrier answers 401 instead of the route. Only RequireUser
// admits so: the route may use the user's id, which the session must then
// match, but nothing else of the session (role, email, name) before its
// step.
func admitPending(claims *accessClaims) principal {
	return principal{user: User{ID: claims.Subject}, sessionID: claims.SessionID}
}

// sessionFromContext returns the session id RequireUser authenticated.
func sessionFromContext(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(ctxKey{}).(principal)
	return p.sessionID, ok && p.sessionID != ""
}
