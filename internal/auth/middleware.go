package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/ratelimit"
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
// in the limiter's round trip when there was one; otherwise it costs a
// round trip, for requests that bear a token only.
func (s *Service) OptionalUser() fiber.Handler {
	return func(c *fiber.Ctx) error {
		header := c.Get(fiber.HeaderAuthorization)
		if header == "" {
			return c.Next()
		}
		pre, _ := c.Locals(precheckKey{}).(*precheck)
		if err := pre.settleNow(); err != nil {
			return err
		}
		if p, err := s.authenticate(c.UserContext(), header, pre); err == nil {
			c.SetUserContext(context.WithValue(c.UserContext(), ctxKey{}, p))
		}
		return c.Next()
	}
}

func (s *Service) require(role string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		pre, _ := c.Locals(precheckKey{}).(*precheck)
		if role == "" && pre.pending() {
			return s.admitPending(c, pre)
		}
		if err := pre.settleNow(); err != nil {
			return err
		}
		p, err := s.authenticate(c.UserContext(), c.Get(fiber.HeaderAuthorization), pre)
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

// authenticate verifies an Authorization header value and the session its
// token names: one signature check and one Redis round trip, or none when
// pre holds the answer of the session check for this very token. It
// returns an error wrapping ErrUnauthorized, or an api.Unavailable error.
func (s *Service) authenticate(ctx context.Context, header string, pre *precheck) (principal, error) {
	claims, err := s.tokens.parseBearer(header)
	if err != nil {
		return principal{}, err
	}
	var u User
	if pre.answers(claims) {
		u, err = sessionUser(pre.reply)
	} else {
		u, err = s.sessions.lookup(ctx, claims.SessionID, claims.ID)
	}
	if errors.Is(err, errSessionGone) {
		return principal{}, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	if err != nil {
		return principal{}, err
	}
	// The session is the authority: a token naming another user's session
	// (which only a leaked key could sign) gets nothing of either.
	if u.ID != claims.Subject {
		return principal{}, fmt.Errorf("%w: token subject does not own session", ErrUnauthorized)
	}
	return principal{user: u, sessionID: claims.SessionID}, nil
}

// sessionFromContext returns the session id RequireUser authenticated.
func sessionFromContext(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(ctxKey{}).(principal)
	return p.sessionID, ok && p.sessionID != ""
}

// precheckKey keys a request's precheck in its Locals.
type precheckKey struct{}

// precheck is a session check that already ran for a request, in another
// round trip (the rate limiter's, see LimiterCompanion).
type precheck struct {
	sid, jti string
	reply    any
	done     bool
	// settle, when set, is the limiter's deferred check of the request
	// (ratelimit.Deferred): the session check has not run yet and will,
	// with the route's first write or when settle is called.
	settle func() error
}

// answers says whether the precheck ran for the token with these claims.
func (p *precheck) answers(claims *accessClaims) bool {
	return p != nil && p.done && p.sid == claims.SessionID && p.jti == claims.ID
}

// pending says whether the session check is deferred and has not run.
func (p *precheck) pending() bool { return p != nil && p.settle != nil && !p.done }

// settleNow runs a pending check now, for a guard that must decide on the
// session before the route: it returns the limiter's refusal (429, 503)
// or the check's (401), or nil when the request may go on.
func (p *precheck) settleNow() error {
	if !p.pending() {
		return nil
	}
	return p.settle()
}

// admitPending lets a request whose session check is deferred reach its
// route as the token's subject: the check runs in the same script call as
// the route's first write, which it refuses for a revoked session (the
// AdmitLua), and the limiter replaces whatever the route
// answered before with 401 (Verdict). Only RequireUser admits so: the
// route may use the user's id, which the session must then match, but
// nothing else of the session (role, email, name) before Place.
func (s *Service) admitPending(c *fiber.Ctx, pre *precheck) error {
	claims, err := s.tokens.parseBearer(c.Get(fiber.HeaderAuthorization))
	if err != nil {
		return err
	}
	if pre.sid != claims.SessionID || pre.jti != claims.ID {
		return fmt.Errorf("%w: the deferred session check is another token's", ErrUnauthorized)
	}
	p := principal{user: User{ID: claims.Subject}, sessionID: claims.SessionID}
	c.SetUserContext(context.WithValue(c.UserContext(), ctxKey{}, p))
	return c.Next()
}

// LimiterCompanion lets the rate limiter's script carry the session check
// of a request (ratelimit.Companion), saving RequireUser its own round trip
// to Redis: Prepare offers check.lua's keys and arguments when the request
// bears a valid access token (a request without one is left to
// RequireUser to refuse); Done hands the script's reply to RequireUser and
// RequireAdmin, which still decide. A request the limiter refuses never
// runs the check, so its session's idle expiry does not slide; a token
// sent to a public route does slide it (its owner is active).
func (s *Service) LimiterCompanion() *ratelimit.Companion {
	return &ratelimit.Companion{
		Lua: checkLua,
		Prepare: func(c *fiber.Ctx) ([]string, []any, bool) {
			claims, err := s.tokens.parseBearer(c.Get(fiber.HeaderAuthorization))
			if err != nil {
				return nil, nil, false
			}
			keys, args := s.sessions.checkArgs(claims.SessionID, claims.ID)
			c.Locals(precheckKey{}, &precheck{sid: claims.SessionID, jti: claims.ID})
			// The subject, for AdmitLua; check.lua reads only its first two.
			return keys, append(args, claims.Subject), true
		},
		Done: func(c *fiber.Ctx, reply any) {
			if p, ok := c.Locals(precheckKey{}).(*precheck); ok {
				p.reply, p.done = reply, true
			}
		},
		Deferred: func(c *fiber.Ctx, settle func() error) {
			if p, ok := c.Locals(precheckKey{}).(*precheck); ok {
				p.settle = settle
			}
		},
		Verdict: func(c *fiber.Ctx) error {
			pre, ok := c.Locals(precheckKey{}).(*precheck)
			if !ok || !pre.done {
				return nil
			}
			_, err := s.authenticate(c.UserContext(), c.Get(fiber.HeaderAuthorization), pre)
			return err
		},
	}
}

// SessionCheckLua is the session check the limiter's companion runs
// (check.lua). Its KEYS and ARGV are those Prepare gives, and ARGV[3] is
// the token's subject.
func SessionCheckLua() string { return checkLua }

// AdmitLua is the body of a Lua function of (reply, KEYS, ARGV), the
// session check's reply, keys and arguments: it is true for a live session
// ({uid, role, email, name}) of the token's subject (ARGV[3]), exactly
// when Verdict, given the same reply, says nil. A deferred request's own
// step (the purchase's reservation) runs only then.
func AdmitLua() string { return admitLua }

const admitLua = `return type(reply) == 'table' and ARGV[3] ~= nil and ARGV[3] ~= '' and reply[1] == ARGV[3]`
