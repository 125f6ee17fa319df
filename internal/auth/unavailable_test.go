package auth

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/testenv"
)

// hangBound is far above the store timeouts; past it a request has hung.
const hangBound = 10 * time.Second

// TestRedisDown: with Redis unreachable, every call that needs a session
// answers 503 with Retry-After (an outage is not a logout), quickly; a
// forged token is still 401, since its signature fails before Redis.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	live := newHarness(t)
	u := live.mustCreate(t, "ada@example.com", RoleShopper)
	tok := live.login(t, "ada@example.com", "")
	h := newHarnessOn(t, live.db, deadRedis(t), live.prefix)

	tests := []struct {
		name, method, path string
		body               any
		headers            []string
		status             int
		code               string
	}{
		{"login", http.MethodPost, "/api/v1/auth/login", map[string]string{"email": u.Email, "password": testPassword}, nil, 503, "unavailable"},
		{"me", http.MethodGet, "/api/v1/me", nil, bearer(tok.AccessToken), 503, "unavailable"},
		{"refresh", http.MethodPost, "/api/v1/auth/refresh", map[string]string{"refresh_token": tok.RefreshToken}, nil, 503, "unavailable"},
		{"logout", http.MethodPost, "/api/v1/auth/logout", nil, bearer(tok.AccessToken), 503, "unavailable"},
		{"forged_token", http.MethodGet, "/api/v1/me", nil, bearer(tok.AccessToken + "x"), 401, "unauthorized"},
		{"register_needs_no_redis", http.MethodPost, "/api/v1/auth/register", map[string]string{"email": "bob@example.com", "password": testPassword}, nil, 201, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			h.do(t, tc.method, tc.path, tc.body, tc.headers...).want(t, tc.status, tc.code)
			if d := time.Since(start); d > hangBound {
				t.Errorf("took %v", d)
			}
		})
	}
	if got := metricsText(t, h); !strings.Contains(got, `shop_auth_logins_total{outcome="unavailable"} 1`) {
		t.Error("the failed login is not counted as unavailable")
	}
	// Back on a live Redis the session is intact: the outage logged no one out.
	live.me(t, tok.AccessToken).want(t, http.StatusOK, "")
}

// TestPostgresDown: register and login answer 503 when PostgreSQL is
// unreachable, while the token check, which needs Redis only, still works.
func TestPostgresDown(t *testing.T) {
	t.Parallel()
	live := newHarness(t)
	u := live.mustCreate(t, "ada@example.com", RoleShopper)
	g, err := live.svc.sessions.create(context.Background(), u, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	access := mint(t, jwt.SigningMethodHS256, testSecret, tokenType, liveClaims(u, g))
	h := newHarnessOn(t, deadPostgres(t), live.rdb, live.prefix)

	tests := []struct {
		name, path string
		body       any
	}{
		{"register", "/api/v1/auth/register", map[string]string{"email": "bob@example.com", "password": testPassword}},
		{"login", "/api/v1/auth/login", map[string]string{"email": u.Email, "password": testPassword}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			h.do(t, http.MethodPost, tc.path, tc.body).want(t, http.StatusServiceUnavailable, "unavailable")
			if d := time.Since(start); d > hangBound {
				t.Errorf("took %v", d)
			}
		})
	}
	h.me(t, access).want(t, http.StatusOK, "")
}

// TestServiceErrorsAreUnavailable checks the Go API, not only the status:
// callers such as `shop user add` rely on the api.Unavailable error.
func TestServiceErrorsAreUnavailable(t *testing.T) {
	t.Parallel()
	svc := New(deadPostgres(t), deadRedis(t), Config{Secret: testSecret, KeyPrefix: "test:"}, nil, nil)
	ctx := context.Background()
	if _, err := svc.CreateUser(ctx, "ada@example.com", testPassword, "", RoleShopper); !isUnavailable(err) {
		t.Errorf("CreateUser: %v, want unavailable", err)
	}
	if _, err := svc.Login(ctx, "ada@example.com", testPassword, ""); !isUnavailable(err) {
		t.Errorf("Login: %v, want unavailable", err)
	}
	if _, err := svc.Refresh(ctx, svc.sessions.newRefresh("00000000-0000-4000-8000-000000000000")); !isUnavailable(err) {
		t.Errorf("Refresh: %v, want unavailable", err)
	}
}

// TestLoginOnFullRedis: a Redis out of memory (noeviction) refuses the
// session's MULTI with EXECABORT, whose cause is the OOM of the queued
// HSET: an outage, so 503 with Retry-After, not a 500. The account itself
// is in PostgreSQL and untouched; the token check of a session made
// before still reads (Redis serves reads when full).
func TestLoginOnFullRedis(t *testing.T) {
	t.Parallel()
	live := newHarness(t)
	u := live.mustCreate(t, "ada@example.com", RoleShopper)
	url := testenv.RedisServer(t, "--maxmemory", "1mb", "--maxmemory-policy", "noeviction")
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries = -1
	full := redis.NewClient(opts)
	t.Cleanup(func() { _ = full.Close() })
	h := newHarnessOn(t, live.db, full, live.prefix)
	before := h.login(t, u.Email, "")
	fill(t, full)

	r := h.do(t, http.MethodPost, "/api/v1/auth/login", map[string]string{"email": u.Email, "password": testPassword})
	r.want(t, http.StatusServiceUnavailable, "unavailable") // with Retry-After
	if got := metricsText(t, h); !strings.Contains(got, `shop_auth_logins_total{outcome="unavailable"} 1`) {
		t.Error("the refused login is not counted as unavailable")
	}
	h.me(t, before.AccessToken).want(t, http.StatusOK, "")
}

// fill writes to rdb until Redis refuses for OOM.
func fill(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	blob := strings.Repeat("x", 64<<10)
	for i := range 1000 {
		err := rdb.Set(ctx, "fill:"+strconv.Itoa(i), blob, 0).Err()
		if redis.IsOOMError(err) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("Redis never refused a write: is maxmemory set?")
}
