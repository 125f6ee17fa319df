package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// mint signs claims the way an attacker or a buggy issuer might. typ sets
// the type header; "-" drops it.
func mint(t testing.TB, method jwt.SigningMethod, key any, typ string, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["typ"] = typ
	if typ == "-" {
		delete(tok.Header, "typ")
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	return s
}

// liveClaims are the claims of a real session's current access token.
func liveClaims(u User, g grant) accessClaims {
	now := time.Now()
	return accessClaims{
		SessionID: g.sid, Role: u.Role,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject: u.ID, ID: g.jti, Issuer: issuer, Audience: jwt.ClaimStrings{audience},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)),
		},
	}
}

// tamper swaps the payload of a signed token, keeping its signature.
func tamper(t *testing.T, token string, edit func(map[string]any)) string {
	t.Helper()
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, _ = json.Marshal(m)
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

// TestForgedAndMalformedTokens: every token that is not a live session's
// current, properly signed access token is 401 unauthorized, never a panic
// or a 500.
func TestForgedAndMalformedTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	u := h.mustCreate(t, "ada@example.com", RoleShopper)
	g, err := h.svc.sessions.create(context.Background(), u, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hs := jwt.SigningMethodHS256
	signed := func(edit func(*accessClaims)) string {
		c := liveClaims(u, g)
		edit(&c)
		return "Bearer " + mint(t, hs, testSecret, tokenType, c)
	}
	valid := signed(func(*accessClaims) {})
	raw := strings.TrimPrefix(valid, "Bearer ")

	tests := []struct {
		name   string
		header string
		status int
	}{
		{"valid", valid, 200},
		{"valid_scheme_lowercase", "bearer " + raw, 200},
		{"valid_expired_within_leeway", signed(func(c *accessClaims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-10 * time.Second)) }), 200},
		{"alg_none", "Bearer " + mint(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, tokenType, liveClaims(u, g)), 401},
		{"other_key", "Bearer " + mint(t, hs, []byte("another-secret-0123456789abcdef0123"), tokenType, liveClaims(u, g)), 401},
		{"hs512_same_key", "Bearer " + mint(t, jwt.SigningMethodHS512, testSecret, tokenType, liveClaims(u, g)), 401},
		{"tampered_role", "Bearer " + tamper(t, raw, func(m map[string]any) { m["role"] = RoleAdmin }), 401},
		{"tampered_sub", "Bearer " + tamper(t, raw, func(m map[string]any) { m["sub"] = uuid.NewString() }), 401},
		{"expired", signed(func(c *accessClaims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour)) }), 401},
		{"missing_exp", signed(func(c *accessClaims) { c.ExpiresAt = nil }), 401},
		{"issued_in_future", signed(func(c *accessClaims) { c.IssuedAt = jwt.NewNumericDate(time.Now().Add(time.Hour)) }), 401},
		{"wrong_iss", signed(func(c *accessClaims) { c.Issuer = "evil" }), 401},
		{"wrong_aud", signed(func(c *accessClaims) { c.Audience = jwt.ClaimStrings{"other-api"} }), 401},
		{"missing_aud", signed(func(c *accessClaims) { c.Audience = nil }), 401},
		{"missing_sid", signed(func(c *accessClaims) { c.SessionID = "" }), 401},
		{"sid_not_uuid", signed(func(c *accessClaims) { c.SessionID = "../../x" }), 401},
		{"missing_jti", signed(func(c *accessClaims) { c.ID = "" }), 401},
		{"unknown_role", signed(func(c *accessClaims) { c.Role = "root" }), 401},
		{"stale_jti", signed(func(c *accessClaims) { c.ID = uuid.NewString() }), 401},
		{"unknown_session", signed(func(c *accessClaims) { c.SessionID = uuid.NewString() }), 401},
		{"typ_jwt", "Bearer " + mint(t, hs, testSecret, "JWT", liveClaims(u, g)), 401},
		{"typ_missing", "Bearer " + mint(t, hs, testSecret, "-", liveClaims(u, g)), 401},
		{"padded_base64", "Bearer " + strings.Replace(raw, ".", "==.", 1), 401},
		{"garbage_base64", "Bearer !!!.@@@.###", 401},
		{"two_parts", "Bearer abc.def", 401},
		{"four_parts", "Bearer " + raw + ".x", 401},
		{"two_tokens", valid + " " + raw, 401},
		{"dots_3k", "Bearer " + strings.Repeat(".", 3000), 401},
		{"basic_scheme", "Basic dXNlcjpwYXNzd29yZA==", 401},
		{"bearer_only", "Bearer", 401},
		{"bearer_space", "Bearer   ", 401},
		{"no_scheme", raw, 401},
		{"empty", "", 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(t, http.MethodGet, "/api/v1/me", nil, "Authorization", tc.header)
			if tc.status == 200 {
				r.want(t, 200, "")
				return
			}
			r.want(t, http.StatusUnauthorized, "unauthorized")
		})
	}
}

// TestMegabyteOfDots: a huge header is refused before any parsing
// (CVE-2025-30204 made golang-jwt allocate ~16 bytes per dot). Not
// parallel, so the allocation count is this test's alone.
func TestMegabyteOfDots(t *testing.T) {
	tc := newTokenCodec(testSecret, time.Minute)
	header := "Bearer " + strings.Repeat(".", 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := tc.parseBearer(header)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("refusing the header allocated %d bytes", grew)
	}
}

func TestIssuedTokenClaims(t *testing.T) {
	t.Parallel()
	tc := newTokenCodec(testSecret, 7*time.Minute)
	u := User{ID: uuid.NewString(), Role: RoleAdmin}
	sid, jti := uuid.NewString(), uuid.NewString()
	now := time.Now()
	s, err := tc.issue(u, sid, jti, now)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tc.parseBearer("Bearer " + s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != u.ID || c.SessionID != sid || c.ID != jti || c.Role != RoleAdmin || c.Issuer != issuer ||
		len(c.Audience) != 1 || c.Audience[0] != audience || c.ExpiresAt.Unix() != now.Add(7*time.Minute).Unix() ||
		c.IssuedAt.Unix() != now.Unix() {
		t.Errorf("claims = %+v", c)
	}
	if _, err := newTokenCodec(nil, time.Minute).issue(u, sid, jti, now); !errors.Is(err, ErrNoSecret) {
		t.Errorf("issuing without a secret: %v, want ErrNoSecret", err)
	}
	if _, err := newTokenCodec(nil, time.Minute).parseBearer("Bearer " + s); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("verifying without a secret: %v, want ErrUnauthorized", err)
	}
}

// FuzzParseBearer: any header either verifies to complete claims or is
// refused with ErrUnauthorized; never a panic.
func FuzzParseBearer(f *testing.F) {
	tc := newTokenCodec(testSecret, time.Hour)
	valid, err := tc.issue(User{ID: uuid.NewString(), Role: RoleShopper}, uuid.NewString(), uuid.NewString(), time.Now())
	if err != nil {
		f.Fatal(err)
	}
	none := mint(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, tokenType, jwt.MapClaims{"sub": "x"})
	for _, s := range []string{"Bearer " + valid, "bearer " + valid, "Bearer " + none, "Bearer " + valid + "x",
		"Bearer ..", "Bearer a.b.c", "Basic x", "", "Bearer " + strings.Repeat(".", 5000), "Bearer e30.e30.", "Bearer\t" + valid} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		c, err := tc.parseBearer(header)
		if err != nil {
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("parseBearer(%q): %v, not ErrUnauthorized", header, err)
			}
			return
		}
		if c.complete() != nil || c.Issuer != issuer {
			t.Fatalf("parseBearer(%q) accepted incomplete claims %+v", header, c)
		}
	})
}

// A request without a bearer token is refused without allocating: the
// request's checks (internal/onetrip) ask every request, and most bear none.
func TestNoBearerAllocatesNothing(t *testing.T) {
	tc := newTokenCodec(testSecret, time.Minute)
	for _, header := range []string{"", "Basic dXNlcjpwYXNz"} {
		if _, err := tc.parseBearer(header); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("%q: err %v, want ErrUnauthorized", header, err)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = tc.parseBearer(header) }); n != 0 {
			t.Fatalf("%q: %v allocations a call, want 0", header, n)
		}
	}
}
