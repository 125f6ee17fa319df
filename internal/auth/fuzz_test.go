package auth

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/testenv"
)

// fuzzHarness is the auth routes in the real app, with fast password
// hashing so that a fuzzer runs more than a few logins a second.
type fuzzHarness struct {
	svc *Service
	app *fiber.App
	r   *testenv.Redis
}

func newFuzzHarness(f *testing.F) *fuzzHarness {
	f.Helper()
	r := testenv.NewRedis(f)
	db := testenv.NewDatabase(f).Pool
	log, reg := slog.New(slog.DiscardHandler), prometheus.NewRegistry()
	svc := New(db, r.Client, Config{Secret: testSecret, AccessTTL: testAccessTTL, SessionTTL: testSessionTTL,
		KeyPrefix: r.Prefix, FastHashing: true}, log, reg)
	app := server.New(server.Deps{Log: log, Redis: r.Client, DB: db, Registry: reg, BodyLimit: 64 << 10,
		Mount: []func(fiber.Router){svc.Routes}})
	if _, err := svc.CreateUser(context.Background(), fuzzEmail, testPassword, "", RoleShopper); err != nil {
		f.Fatal(err)
	}
	return &fuzzHarness{svc: svc, app: app, r: r}
}

const fuzzEmail = "fuzz@example.com"

// sessions counts the session hashes (SCAN, never KEYS).
func (h *fuzzHarness) sessions(t testing.TB) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	iter := h.r.Client.Scan(ctx, 0, h.r.Prefix+"session:*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// FuzzLogin sends arbitrary bodies to POST /auth/login (drill 29): never a
// 5xx, every 4xx a problem document, a session made only by a 200, and a
// 200 only for the right password.
func FuzzLogin(f *testing.F) {
	h := newFuzzHarness(f)
	for _, s := range []string{
		`{"email":"fuzz@example.com","password":"correct horse battery"}`,
		`{"email":"fuzz@example.com","password":"correct horse battery","device":"phone"}`,
		`{"email":"FUZZ@Example.com","password":"correct horse battery"}`,
		`{"email":"fuzz@example.com","password":"wrong"}`,
		`{"email":"nobody@example.com","password":"correct horse battery"}`,
		`{"email":"fuzz@example.com"}`, `{}`, `[]`, `null`, ``, `{"email":`,
		`{"email":1,"password":true}`,
		"{\"email\":\"fuzz@example.com\x00\",\"password\":\"\xff\"}",
		`{"email":"fuzz@example.com","password":"correct horse battery","device":"` + string(bytes.Repeat([]byte("d"), 5000)) + `"}`,
		`{"a[-1]":"x","a.18446744073704":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := h.sessions(t)
		r := openapitest.Do(t, h.app, http.MethodPost, "/api/v1/auth/login", "", string(body))
		openapitest.WantSound(t, r)
		made := h.sessions(t) - before
		switch {
		case r.Status == http.StatusOK && (made != 1 || !bytes.Contains(body, []byte(testPassword))):
			t.Fatalf("200 made %d sessions for %q", made, body)
		case r.Status != http.StatusOK && made != 0:
			t.Fatalf("%d made %d sessions", r.Status, made)
		}
	})
}

// FuzzRefresh sends arbitrary bodies to POST /auth/refresh (drill 29); in
// a body, $VALID stands for a refresh token just issued, so the fuzzer
// mutates real tokens too. Never a 5xx, every 4xx a problem document, no
// session made, and a 200 only for the token exactly as issued.
func FuzzRefresh(f *testing.F) {
	h := newFuzzHarness(f)
	for _, s := range []string{
		`{"refresh_token":"$VALID"}`,
		`{"refresh_token":"$VALIDx"}`,
		`{"refresh_token":"x$VALID"}`,
		`{"refresh_token":"$VALID","refresh_token":"other"}`,
		`{"refresh_token":""}`, `{"refresh_token":null}`, `{"refresh_token":7}`, `{}`, `[]`, ``,
		`{"refresh_token":"00000000-0000-4000-8000-000000000000.AAAA"}`,
		`{"refresh_token":"..."}`,
		"{\"refresh_token\":\"\x00\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var token string
		if bytes.Contains(body, []byte("$VALID")) {
			tok, err := h.svc.Login(context.Background(), fuzzEmail, testPassword, "fuzz")
			if err != nil {
				t.Fatal(err)
			}
			token = tok.RefreshToken
			body = bytes.ReplaceAll(body, []byte("$VALID"), []byte(token))
		}
		before := h.sessions(t)
		r := openapitest.Do(t, h.app, http.MethodPost, "/api/v1/auth/refresh", "", string(body))
		openapitest.WantSound(t, r)
		if made := h.sessions(t) - before; made > 0 {
			t.Fatalf("%d made %d sessions", r.Status, made)
		}
		if r.Status == http.StatusOK && (token == "" || !bytes.Contains(body, []byte(`"`+token+`"`))) {
			t.Fatalf("200 for %q", body)
		}
	})
}
