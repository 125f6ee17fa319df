// Package authtest holds internal/auth's tests through the whole application
// (shoptest), so auth's own tests build only auth and what it imports.
package authtest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

const (
	testPassword  = shoptest.Password
	testAccessTTL = 5 * time.Minute
)

// httpHarness is the whole application, wired as shop serve wires it: the
// session check rides in the rate limiter's round trip, under a limit no
// test reaches.
type httpHarness struct{ *shoptest.App }

func newHTTPHarness(t *testing.T) *httpHarness {
	t.Helper()
	return &httpHarness{shoptest.New(t, shoptest.Options{Config: func(c *config.Config) {
		c.AccessTTL = testAccessTTL
		c.RateLimit = config.RateLimit{Limit: 1_000_000, Window: time.Minute}
	}})}
}

type result struct{ openapitest.Reply }

// do sends one request (a string body as it is, anything else as JSON),
// checked against openapi.yaml; headers are name, value pairs.
func (h *httpHarness) do(t *testing.T, method, path string, body any, headers ...string) result {
	t.Helper()
	raw := ""
	switch b := body.(type) {
	case nil:
	case string:
		raw = b
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(enc)
	}
	token := ""
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Authorization" {
			token = strings.TrimPrefix(headers[i+1], "Bearer ")
		}
	}
	return result{h.Do(t, method, path, token, raw)}
}

func bearer(access string) []string { return []string{"Authorization", "Bearer " + access} }

// want fails t unless r has the status and, for errors, the problem code.
func (r result) want(t *testing.T, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d: %s", r.Status, status, r.Body)
	}
	if code != "" {
		openapitest.WantProblem(t, r.Reply, status, code)
	}
}

func (r result) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

func (h *httpHarness) mustCreate(t *testing.T, email, role string) auth.User {
	t.Helper()
	u, err := h.Auth.CreateUser(context.Background(), email, testPassword, "", role)
	if err != nil {
		t.Fatalf("create %s: %v", email, err)
	}
	return u
}

func (h *httpHarness) login(t *testing.T, email, device string) auth.Tokens {
	t.Helper()
	r := h.do(t, http.MethodPost, "/api/v1/auth/login", map[string]string{"email": email, "password": testPassword, "device": device})
	r.want(t, http.StatusOK, "")
	var tok auth.Tokens
	r.decode(t, &tok)
	return tok
}

func (h *httpHarness) me(t *testing.T, access string) result {
	t.Helper()
	return h.do(t, http.MethodGet, "/api/v1/me", nil, bearer(access)...)
}

func (h *httpHarness) refresh(t *testing.T, refresh string) result {
	t.Helper()
	return h.do(t, http.MethodPost, "/api/v1/auth/refresh", map[string]string{"refresh_token": refresh})
}

// sessionKeys lists the session keys under the app's prefix.
func (h *httpHarness) sessionKeys(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := h.Redis.Client.Scan(ctx, 0, h.Config.KeyPrefix+"session:*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestLifecycle walks register → login → /me → refresh → reuse → login →
// logout over HTTP, checking every exchange against openapi.yaml.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)

	r := h.do(t, http.MethodPost, "/api/v1/auth/register",
		map[string]string{"email": "  Ada@Example.com ", "password": testPassword, "name": "Ada", "role": "admin"})
	r.want(t, http.StatusCreated, "")
	var u auth.User
	r.decode(t, &u)
	if uuid.Validate(u.ID) != nil || u.Email != "Ada@Example.com" || u.Name != "Ada" || u.Role != auth.RoleShopper {
		t.Fatalf("registered %+v: want a uuid, the trimmed email, the name, and role shopper (body role ignored)", u)
	}

	first := h.login(t, "ada@example.COM", "laptop") // any letter case logs in
	if first.TokenType != "Bearer" || first.ExpiresIn != int(testAccessTTL.Seconds()) || first.AccessToken == "" || first.RefreshToken == "" {
		t.Fatalf("tokens %+v", first)
	}
	r = h.me(t, first.AccessToken)
	r.want(t, http.StatusOK, "")
	var me auth.User
	r.decode(t, &me)
	if me != u {
		t.Fatalf("/me = %+v, want %+v", me, u)
	}

	r = h.refresh(t, first.RefreshToken)
	r.want(t, http.StatusOK, "")
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("refresh answer is cacheable: Cache-Control %q", r.Header.Get("Cache-Control"))
	}
	var second auth.Tokens
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
	h := newHTTPHarness(t)
	h.mustCreate(t, "taken@example.com", auth.RoleShopper)
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
	if err := h.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM users").Scan(&n); err != nil || n != 1 {
		t.Errorf("users = %d (%v), want only the first one: a refused request wrote something", n, err)
	}
}

func TestLoginFailures(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	h.mustCreate(t, "ada@example.com", auth.RoleShopper)
	login := func(body any) result { return h.do(t, http.MethodPost, "/api/v1/auth/login", body) }

	unknown := login(map[string]string{"email": "nobody@example.com", "password": testPassword})
	wrong := login(map[string]string{"email": "ada@example.com", "password": testPassword + "!"})
	unknown.want(t, http.StatusUnauthorized, "invalid_credentials")
	wrong.want(t, http.StatusUnauthorized, "invalid_credentials")
	if detail(t, unknown) != detail(t, wrong) {
		t.Errorf("unknown email and wrong password answer differently: %s vs %s", unknown.Body, wrong.Body)
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

// detail is a problem's detail and title: what differs between two 401s,
// if anything.
func detail(t *testing.T, r result) string {
	t.Helper()
	p := r.JSON(t)
	return p["detail"].(string) + "|" + p["title"].(string)
}

func metricsText(t *testing.T, h *httpHarness) string {
	t.Helper()
	return string(h.do(t, http.MethodGet, "/metrics", nil).Body)
}
