package auth

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

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
	h := newHarness(t, productionCost)
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
