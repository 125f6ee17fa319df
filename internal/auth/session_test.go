package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shop-oss/shop/internal/racetest"
)

// TestParallelRefresh: 20 refreshes with one token, released together:
// exactly one wins. The others are reuse, so the session is revoked and
// even the winner's new pair stops working (the documented cost of
// refreshing in parallel).
func TestParallelRefresh(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, tok := h.shopper(t, "ada@example.com", "")

	const n = 20
	results := make([]Tokens, n)
	errs := make([]error, n)
	racetest.Together(racetest.Times(n, func(i int) {
		results[i], errs[i] = h.svc.Refresh(context.Background(), tok.RefreshToken)
	})...)

	var winner *Tokens
	for i, err := range errs {
		switch {
		case err == nil && winner != nil:
			t.Fatal("two refreshes with one token both succeeded")
		case err == nil:
			winner = &results[i]
		case !errors.Is(err, ErrRefreshReused) && !errors.Is(err, ErrInvalidToken):
			t.Fatalf("refresh %d: %v, want a refused token", i, err)
		}
	}
	if winner == nil {
		t.Fatal("no refresh succeeded")
	}
	if got := testutil.ToFloat64(h.svc.metrics.refreshReuse); got < 1 {
		t.Errorf("reuse counter = %v, want >= 1", got)
	}
	h.me(t, winner.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
	h.refresh(t, winner.RefreshToken).want(t, http.StatusUnauthorized, "invalid_token")
}

// TestReuseRevokesSession: presenting a refresh token two rotations old
// revokes the session, and only that session.
func TestReuseRevokesSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, laptop := h.shopper(t, "ada@example.com", "laptop")
	phone := h.login(t, "ada@example.com", "phone")
	ctx := context.Background()

	r2, err := h.svc.Refresh(ctx, laptop.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := h.svc.Refresh(ctx, r2.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Refresh(ctx, laptop.RefreshToken); !errors.Is(err, ErrRefreshReused) {
		t.Fatalf("reuse of the first token: %v, want ErrRefreshReused", err)
	}
	if got := testutil.ToFloat64(h.svc.metrics.refreshReuse); got != 1 {
		t.Errorf("reuse counter = %v, want 1", got)
	}
	if _, err := h.svc.Refresh(ctx, r3.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("current token after reuse: %v, want ErrInvalidToken", err)
	}
	h.me(t, r3.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
	h.me(t, phone.AccessToken).want(t, http.StatusOK, "")
	if !strings.Contains(metricsText(t, h), "shop_auth_refresh_reuse_total 1") {
		t.Error("/metrics lacks shop_auth_refresh_reuse_total 1")
	}
}

// TestBadRefreshTokens: malformed or forged refresh tokens are refused with
// invalid_token and leave the session they name alone, so knowing a
// session id (readable in any access token) cannot log its owner out.
func TestBadRefreshTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, tok := h.shopper(t, "ada@example.com", "")
	sid, err := h.svc.sessions.verifyRefresh(tok.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok.RefreshToken, ".")
	forgedMAC := sid + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	otherKey := New(nil, nil, Config{Secret: []byte("another-secret-0123456789abcdef")}, nil, nil).sessions.newRefresh(sid)
	tests := []struct{ name, token string }{
		{"forged_mac", forgedMAC},
		{"other_secret", otherKey},
		{"sid_swapped", uuid.NewString() + "." + parts[1] + "." + parts[2]},
		{"nonce_changed", sid + ".AAAA." + parts[2]},
		{"no_dots", "garbage"},
		{"mac_not_base64", sid + "." + parts[1] + ".!!!"},
		{"sid_not_uuid", "x." + parts[1] + "." + parts[2]},
		{"too_long", tok.RefreshToken + strings.Repeat("A", 300)},
		{"access_token_as_refresh", tok.AccessToken},
		{"unknown_session", h.svc.sessions.newRefresh(uuid.NewString())},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.refresh(t, tc.token).want(t, http.StatusUnauthorized, "invalid_token")
		})
	}
	h.do(t, http.MethodPost, "/api/v1/auth/refresh", map[string]string{}).want(t, http.StatusBadRequest, "invalid_request")
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "")
	h.refresh(t, tok.RefreshToken).want(t, http.StatusOK, "")
	if got := testutil.ToFloat64(h.svc.metrics.refreshReuse); got != 0 {
		t.Errorf("reuse counter = %v: a forged token counted as reuse", got)
	}
}

// TestLogoutOneDevice: logging out one device leaves the other logged in.
func TestLogoutOneDevice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, laptop := h.shopper(t, "ada@example.com", "laptop")
	phone := h.login(t, "ada@example.com", "phone")

	h.do(t, http.MethodPost, "/api/v1/auth/logout", nil, bearer(laptop.AccessToken)...).want(t, http.StatusNoContent, "")
	h.me(t, laptop.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
	h.refresh(t, laptop.RefreshToken).want(t, http.StatusUnauthorized, "invalid_token")
	h.me(t, phone.AccessToken).want(t, http.StatusOK, "")
	h.refresh(t, phone.RefreshToken).want(t, http.StatusOK, "")
}

// TestNoCrossUserAccess: with user A's tokens nothing of B is reachable:
// /me answers A, A's logout and refresh leave B's session alone, and a
// token naming B's session (signed with the real key, as only a leaked key
// could) gets nothing.
func TestNoCrossUserAccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.mustCreate(t, "a@example.com", RoleShopper)
	b := h.mustCreate(t, "b@example.com", RoleAdmin)
	ta := h.login(t, "a@example.com", "")
	tb := h.login(t, "b@example.com", "")
	cb, err := h.svc.tokens.parseBearer("Bearer " + tb.AccessToken)
	if err != nil {
		t.Fatal(err)
	}

	var me User
	h.me(t, ta.AccessToken).decode(t, &me)
	if me != a {
		t.Fatalf("A's /me = %+v, want %+v", me, a)
	}
	crossed := liveClaims(a, grant{sid: cb.SessionID, jti: cb.ID})
	h.me(t, mint(t, jwt.SigningMethodHS256, testSecret, tokenType, crossed)).want(t, http.StatusUnauthorized, "unauthorized")
	crossed.Role = RoleAdmin
	h.do(t, http.MethodGet, "/api/v1/test/admin", nil, bearer(mint(t, jwt.SigningMethodHS256, testSecret, tokenType, crossed))...).
		want(t, http.StatusUnauthorized, "unauthorized")

	if _, err := h.svc.Refresh(context.Background(), ta.RefreshToken); err != nil {
		t.Fatal(err)
	}
	h.do(t, http.MethodPost, "/api/v1/auth/logout", nil, bearer(ta.AccessToken)...).want(t, http.StatusUnauthorized, "unauthorized")
	h.me(t, tb.AccessToken).decode(t, &me)
	if me != b {
		t.Fatalf("B's /me = %+v after A's actions, want %+v", me, b)
	}
}

// TestSessionKeys: the session is one hash under the prefix with a TTL; it
// stores hashes, never the refresh token; each use slides the expiry; and a
// check of a deleted session does not recreate it.
func TestSessionKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	u, tok := h.shopper(t, "ada@example.com", "iphone")
	ctx := context.Background()

	keys := h.sessionKeys(t)
	if len(keys) != 1 || !strings.HasPrefix(keys[0], h.prefix+"session:") {
		t.Fatalf("keys = %v, want one %ssession:<sid>", keys, h.prefix)
	}
	key := keys[0]
	fields := h.rdb.HGetAll(ctx, key).Val()
	if fields[fieldUser] != u.ID || fields[fieldRole] != RoleShopper || fields[fieldDevice] != "iphone" ||
		fields[fieldRefresh] != digest(tok.RefreshToken) || fields[fieldJTI] == "" {
		t.Errorf("session = %v", fields)
	}
	for name, v := range fields {
		if strings.Contains(v, tok.RefreshToken) || strings.Contains(tok.RefreshToken, v) && len(v) > 40 {
			t.Errorf("field %s holds the refresh token", name)
		}
	}
	if ttl := h.rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > testSessionTTL {
		t.Fatalf("TTL = %v, want (0, %v]", ttl, testSessionTTL)
	}

	h.rdb.PExpire(ctx, key, time.Minute)
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "")
	if ttl := h.rdb.PTTL(ctx, key).Val(); ttl <= time.Minute {
		t.Errorf("TTL = %v after a request: the idle expiry did not slide", ttl)
	}

	h.rdb.Del(ctx, key)
	h.me(t, tok.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
	h.refresh(t, tok.RefreshToken).want(t, http.StatusUnauthorized, "invalid_token")
	if n := h.rdb.Exists(ctx, key).Val(); n != 0 {
		t.Error("a check or refresh recreated the deleted session")
	}
}

// TestSessionSlideWritesRarely: a request on a session whose expiry is
// within 1/100 of the idle TTL of a full slide does not slide it (no write
// for Redis to append), and one further off slides it to the full TTL.
func TestSessionSlideWritesRarely(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, tok := h.shopper(t, "ada@example.com", "iphone")
	ctx := context.Background()
	key := h.sessionKeys(t)[0]

	near := testSessionTTL - testSessionTTL/200 // within the slack
	h.rdb.PExpire(ctx, key, near)
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "")
	if ttl := h.rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > near {
		t.Errorf("TTL = %v after a request within the slack, want (0, %v]: it slid", ttl, near)
	}

	far := testSessionTTL / 2 // well past the slack: no run is slow enough to matter
	h.rdb.PExpire(ctx, key, far)
	h.me(t, tok.AccessToken).want(t, http.StatusOK, "")
	if ttl := h.rdb.PTTL(ctx, key).Val(); ttl <= far {
		t.Errorf("TTL = %v after a request past the slack, want above %v: it did not slide", ttl, far)
	}
}
