package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLifecycle walks register → login → /me → refresh → reuse → login →
// logout over HTTP, checking every exchange against openapi.yaml.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	r := h.do(t, http.MethodPost, "/api/v1/auth/register",
		map[string]string{"email": "  Ada@Example.com ", "password": testPassword, "name": "Ada", "role": "admin"})
	r.want(t, http.StatusCreated, "")
	var u User
	r.decode(t, &u)
	if !isUUID(u.ID) || u.Email != "Ada@Example.com" || u.Name != "Ada" || u.Role != RoleShopper {
		t.Fatalf("registered %+v: want a uuid, the trimmed email, the name, and role shopper (body role ignored)", u)
	}

	first := h.login(t, "ada@example.COM", "laptop") // any letter case logs in
	if first.TokenType != "Bearer" || first.ExpiresIn != int(testAccessTTL.Seconds()) || first.AccessToken == "" || first.RefreshToken == "" {
		t.Fatalf("tokens %+v", first)
	}
	r = h.me(t, first.AccessToken)
	r.want(t, http.StatusOK, "")
	var me User
	r.decode(t, &me)
	if me != u {
		t.Fatalf("/me = %+v, want %+v", me, u)
	}

	r = h.refresh(t, first.RefreshToken)
	r.want(t, http.StatusOK, "")
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("refresh answer is cacheable: Cache-Control %q", r.header.Get("Cache-Control"))
	}
	var second Tokens
	r.decode(t, &second)
	if second.RefreshToken == first.RefreshToken || second.AccessToken == first.AccessToken {
		t.Fatal("refresh returned the same tokens")
	}
	h.me(t, first.AccessToken).want(t, http.StatusUnauthorized, "unauthorized") // superseded jti
	h.me(t, second.AccessToken).want(t, http.StatusOK, "")

	// Reuse of the first refresh token: 401, and the session is gone, so
	// the newest pair dies with it.
	h.refresh(t, first.RefreshToken).want(t, http.StatusUnauthorized, "invalid_token")
	h.me(t, second.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
	h.refresh(t, second.RefreshToken).want(t, http.StatusUnauthorized, "invalid_token")

	third := h.login(t, "ada@example.com", "phone")
	h.do(t, http.MethodPost, "/api/v1/auth/logout", nil, bearer(third.AccessToken)...).want(t, http.StatusNoContent, "")
	h.me(t, third.AccessToken).want(t, http.StatusUnauthorized, "unauthorized")
	h.refresh(t, third.RefreshToken).want(t, http.StatusUnauthorized, "invalid_token")
	h.do(t, http.MethodPost, "/api/v1/auth/logout", nil, bearer(third.AccessToken)...).want(t, http.StatusUnauthorized, "unauthorized")
	h.do(t, http.MethodPost, "/api/v1/auth/logout", nil).want(t, http.StatusUnauthorized, "unauthorized")
}

func TestRegisterValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustCreate(t, "taken@example.com", RoleShopper)
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		fields []string // the fields the errors name, in order
	}{
		{"email_missing", map[string]string{"password": testPassword}, 400, "invalid_request", []string{"email"}},
		{"email_no_at", map[string]string{"email": "ada.example.com", "password": testPassword}, 400, "invalid_request", []string{"email"}},
		{"email_display_name", map[string]string{"email": "Ada <ada@example.com>", "password": testPassword}, 400, "invalid_request", []string{"email"}},
		{"email_angle_brackets", map[string]string{"email": "<ada@example.com>", "password": testPassword}, 400, "invalid_request", []string{"email"}},
		{"email_two", map[string]string{"email": "a@example.com, b@example.com", "password": testPassword}, 400, "invalid_request", []string{"email"}},
		{"email_too_long", map[string]string{"email": strings.Repeat("a", 250) + "@example.com", "password": testPassword}, 400, "invalid_request", []string{"email"}},
		{"email_control", map[string]string{"email": "ada\x00@example.com", "password": testPassword}, 400, "invalid_request", []string{"email"}},
		{"password_missing", map[string]string{"email": "new@example.com"}, 400, "invalid_request", []string{"password"}},
		{"password_7_chars", map[string]string{"email": "new@example.com", "password": "1234567"}, 400, "invalid_request", []string{"password"}},
		{"password_over_128_bytes", map[string]string{"email": "new@example.com", "password": strings.Repeat("p", 129)}, 400, "invalid_request", []string{"password"}},
		{"name_too_long", map[string]string{"email": "new@example.com", "password": testPassword, "name": strings.Repeat("n", 201)}, 400, "invalid_request", []string{"name"}},
		{"name_nul", map[string]string{"email": "new@example.com", "password": testPassword, "name": "a\x00b"}, 400, "invalid_request", []string{"name"}},
		{"all_bad", map[string]string{"email": "x", "password": "short", "name": "\x07"}, 400, "invalid_request", []string{"email", "password", "name"}},
		{"wrong_type", `{"email":1,"password":"correct horse"}`, 400, "invalid_request", []string{"email"}},
		{"malformed", `{"email":`, 400, "invalid_request", []string{"body"}},
		{"not_object", `["a"]`, 400, "invalid_request", []string{"body"}},
		{"duplicate_other_case", map[string]string{"email": " TAKEN@example.com", "password": testPassword}, 409, "email_taken", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(t, http.MethodPost, "/api/v1/auth/register", tc.body)
			r.want(t, tc.status, tc.code)
			var p struct {
				Errors []struct{ Field string }
			}
			r.decode(t, &p)
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Errorf("errors name %v, want %v", got, tc.fields)
			}
		})
	}
	var n int
	if err := h.db.QueryRow(context.Background(), "SELECT count(*) FROM users").Scan(&n); err != nil || n != 1 {
		t.Errorf("users = %d (%v), want only the first one: a refused request wrote something", n, err)
	}
}

func TestLoginFailures(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustCreate(t, "ada@example.com", RoleShopper)
	login := func(body any) result { return h.do(t, http.MethodPost, "/api/v1/auth/login", body) }

	unknown := login(map[string]string{"email": "nobody@example.com", "password": testPassword})
	wrong := login(map[string]string{"email": "ada@example.com", "password": testPassword + "!"})
	unknown.want(t, http.StatusUnauthorized, "invalid_credentials")
	wrong.want(t, http.StatusUnauthorized, "invalid_credentials")
	if detail(t, unknown) != detail(t, wrong) {
		t.Errorf("unknown email and wrong password answer differently: %s vs %s", unknown.body, wrong.body)
	}
	login(map[string]string{"email": "ada@example.com", "password": strings.Repeat("x", 10000)}).want(t, http.StatusUnauthorized, "invalid_credentials")
	login(map[string]string{"email": "ada@example.com"}).want(t, http.StatusBadRequest, "invalid_request")
	login(map[string]string{"password": testPassword}).want(t, http.StatusBadRequest, "invalid_request")
	login(map[string]string{"email": "ada@example.com", "password": testPassword, "device": strings.Repeat("d", 101)}).want(t, http.StatusBadRequest, "invalid_request")
	login(`{"email":"ada@example.com","password":["x"]}`).want(t, http.StatusBadRequest, "invalid_request")

	keys := h.sessionKeys(t)
	if len(keys) != 0 {
		t.Errorf("failed logins left sessions: %v", keys)
	}
	m := metricsText(t, h)
	for _, want := range []string{
		`shop_auth_logins_total{outcome="invalid_credentials"} 3`,
		`shop_auth_logins_total{outcome="invalid_request"} 3`,
		`shop_auth_logins_total{outcome="success"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// detail is a problem's detail: what differs between two 401s, if anything.
func detail(t *testing.T, r result) string {
	t.Helper()
	var p map[string]any
	r.decode(t, &p)
	return p["detail"].(string) + "|" + p["title"].(string)
}

func metricsText(t *testing.T, h *harness) string {
	t.Helper()
	return string(h.do(t, http.MethodGet, "/metrics", nil).body)
}

// TestRoleMiddleware: admin routes admit admins only, and the role comes
// from the session, so a demotion written there applies to the next request.
func TestRoleMiddleware(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.mustCreate(t, "root@example.com", RoleAdmin)
	h.mustCreate(t, "ada@example.com", RoleShopper)
	at := h.login(t, "root@example.com", "").AccessToken
	st := h.login(t, "ada@example.com", "").AccessToken

	tests := []struct {
		name, path, access string
		status             int
		code               string
	}{
		{"admin_on_admin_route", "/api/v1/test/admin", at, 200, ""},
		{"admin_on_user_route", "/api/v1/test/user", at, 200, ""},
		{"shopper_on_user_route", "/api/v1/test/user", st, 200, ""},
		{"shopper_on_admin_route", "/api/v1/test/admin", st, 403, "forbidden"},
		{"anonymous_on_admin_route", "/api/v1/test/admin", "", 401, "unauthorized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.access != "" {
				hdr = bearer(tc.access)
			}
			h.do(t, http.MethodGet, tc.path, nil, hdr...).want(t, tc.status, tc.code)
		})
	}
	r := h.do(t, http.MethodGet, "/api/v1/test/admin", nil, bearer(at)...)
	var got User
	r.decode(t, &got)
	if got != admin {
		t.Errorf("context user = %+v, want %+v", got, admin)
	}

	claims, err := h.svc.tokens.parseBearer("Bearer " + at)
	if err != nil {
		t.Fatal(err)
	}
	h.rdb.HSet(context.Background(), h.svc.sessions.key(claims.SessionID), fieldRole, RoleShopper)
	h.do(t, http.MethodGet, "/api/v1/test/admin", nil, bearer(at)...).want(t, http.StatusForbidden, "forbidden")
}

// sessionKeys lists the session keys under the harness prefix.
func (h *harness) sessionKeys(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := h.rdb.Scan(ctx, 0, h.prefix+"session:*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestUnknownEmailCostsAHash: a login for an unknown email does the same
// argon2 work as one with a wrong password, so timing does not reveal
// which emails have accounts. Without the dummy hash it would answer ~50x
// faster; the bound is loose (5x) so a busy machine cannot fail it.
func TestUnknownEmailCostsAHash(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustCreate(t, "ada@example.com", RoleShopper)
	fastest := func(email string) time.Duration {
		best := time.Hour
		for range 3 {
			start := time.Now()
			_, err := h.svc.Login(context.Background(), email, "wrong password", "")
			if !errors.Is(err, ErrInvalidCredentials) {
				t.Fatalf("login %s: %v", email, err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	known, unknown := fastest("ada@example.com"), fastest("nobody@example.com")
	if unknown < known/5 {
		t.Errorf("unknown email took %v, a wrong password %v: timing reveals which emails exist", unknown, known)
	}
}
