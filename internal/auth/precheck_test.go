package auth

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
)

// callCounter counts the calls a client sends to Redis (a pipeline is one).
type callCounter struct{ n atomic.Int64 }

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// An authenticated request costs one call to Redis: the session check rides
// in the limiter's script. It slides the session's idle expiry when the
// request is allowed and, once the client is limited, does nothing at all.
func TestSessionCheckRidesWithTheLimiter(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	counted := redis.NewClient(r.Client.Options())
	t.Cleanup(func() { _ = counted.Close() })
	calls := &callCounter{}
	counted.AddHook(calls)
	const limit = 6
	h := newHarnessLimited(t, testenv.NewDatabase(t).Pool, counted, r.Prefix, limit)
	u := h.mustCreate(t, "ada@example.com", RoleShopper)
	tok := h.login(t, "ada@example.com", "") // request 1 of the window
	ctx := context.Background()
	claims, err := h.svc.tokens.verify(tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	session := h.svc.sessions.key(claims.SessionID)

	h.me(t, tok.AccessToken).want(t, http.StatusOK, "") // loads the script
	calls.n.Store(0)
	var got User
	h.me(t, tok.AccessToken).decode(t, &got)
	if n := calls.n.Load(); n != 1 || got.ID != u.ID {
		t.Fatalf("GET /me: %d calls to Redis, user %q; want 1 call and %q", n, got.ID, u.ID)
	}

	const short = 50 * time.Second
	r.Client.PExpire(ctx, session, short)
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "") // request 4
	if ttl := r.Client.PTTL(ctx, session).Val(); ttl <= short {
		t.Fatalf("after an allowed request the session expires in %s, want the idle expiry slid to ~%s", ttl, testSessionTTL)
	}
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "")
	h.do(t, http.MethodGet, "/api/v1/test/admin", nil, bearer(tok.AccessToken)...).want(t, http.StatusForbidden, "forbidden")

	r.Client.PExpire(ctx, session, short)
	h.me(t, tok.AccessToken).want(t, http.StatusTooManyRequests, "rate_limited")
	if ttl := r.Client.PTTL(ctx, session).Val(); ttl > short {
		t.Fatalf("a limited request slid the session's expiry to %s", ttl)
	}
}

// The limiter's companion answers for the token it checked, and a revoked
// session is refused through it as through RequireUser's own check.
func TestPrecheckAnswersOnlyItsToken(t *testing.T) {
	t.Parallel()
	claims := &accessClaims{SessionID: "s1"}
	claims.ID = "j1"
	for _, tc := range []struct {
		name string
		p    *precheck
		want bool
	}{
		{"none", nil, false},
		{"prepared, not run", &precheck{sid: "s1", jti: "j1"}, false},
		{"ran", &precheck{sid: "s1", jti: "j1", done: true}, true},
		{"other session", &precheck{sid: "s2", jti: "j1", done: true}, false},
		{"other token", &precheck{sid: "s1", jti: "j2", done: true}, false},
	} {
		if got := tc.p.answers(claims); got != tc.want {
			t.Errorf("%s: answers = %v, want %v", tc.name, got, tc.want)
		}
	}

	h := newHarness(t)
	h.mustCreate(t, "ada@example.com", RoleShopper)
	tok := h.login(t, "ada@example.com", "")
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "")
	h.do(t, http.MethodPost, "/api/v1/auth/logout", nil, bearer(tok.AccessToken)...).want(t, http.StatusNoContent, "")
	h.me(t, tok.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
}
