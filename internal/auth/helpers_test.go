package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/testenv"
)

var testSecret = []byte("test-secret-0123456789abcdef0123456789abcdef")

const (
	testAccessTTL  = 5 * time.Minute
	testSessionTTL = time.Hour
)

// harness is a Service on a private database and key prefix, mounted in an
// in-process Fiber app.
type harness struct {
	svc    *Service
	app    *fiber.App
	db     *pgxpool.Pool
	rdb    redis.UniversalClient
	prefix string
	reg    *prometheus.Registry
}

// newHarness builds a service on the test Redis and PostgreSQL behind the
// rate limiter, under a limit no test reaches. (The session check riding
// with the limiter's window is internal/onetrip's, tested there.)
func newHarness(t *testing.T, opts ...func(*Config)) *harness {
	t.Helper()
	r := testenv.NewRedis(t)
	return newHarnessLimited(t, testenv.NewDatabase(t).Pool, r.Client, r.Prefix, 1_000_000, opts...)
}

// productionCost hashes at OWASP's cost, for the tests of what the cost
// buys (an unknown email's login costing a hash, say).
func productionCost(c *Config) { c.FastHashing = false }

// newHarnessOn builds a service on the given stores (a dead one, say),
// without a rate limiter, so that the service alone answers an outage.
func newHarnessOn(t *testing.T, db *pgxpool.Pool, rdb redis.UniversalClient, prefix string) *harness {
	t.Helper()
	return newHarnessLimited(t, db, rdb, prefix, 0)
}

// newHarnessLimited builds a service whose app allows limit requests a
// minute per client (0: no limiter); opts adjust the service's Config.
func newHarnessLimited(t *testing.T, db *pgxpool.Pool, rdb redis.UniversalClient, prefix string, limit int, opts ...func(*Config)) *harness {
	t.Helper()
	h := &harness{db: db, rdb: rdb, prefix: prefix, reg: prometheus.NewRegistry()}
	log := slog.New(slog.DiscardHandler)
	// Cheap hashes: the harness's tests are about sessions, throttles and
	// erasure, not the hash's cost, which password_test.go checks at the
	// production cost (OWASP's argon2id under -race took a second a login).
	cfg := Config{Secret: testSecret, AccessTTL: testAccessTTL, SessionTTL: testSessionTTL, KeyPrefix: prefix, FastHashing: true}
	for _, o := range opts {
		o(&cfg)
	}
	h.svc = New(db, rdb, cfg, log, h.reg)
	deps := server.Deps{
		Log: log, Redis: rdb, DB: db, Registry: h.reg, BodyLimit: 64 * 1024,
		Mount: []func(fiber.Router){h.svc.Routes, h.testRoutes},
	}
	if limit > 0 {
		deps.Limiter = ratelimit.New(rdb, prefix, limit, time.Minute)
	}
	h.app = server.New(deps)
	return h
}

// testRoutes are undocumented routes behind each middleware, answering the
// user the middleware put in the context.
func (h *harness) testRoutes(r fiber.Router) {
	whoami := func(c *fiber.Ctx) error { return c.JSON(MustUser(c)) }
	r.Get("/test/user", h.svc.RequireUser(), whoami)
	r.Get("/test/admin", h.svc.RequireAdmin(), whoami)
}

// deadRedis is a client for a closed port: every call fails at once.
func deadRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deadPostgres is a pool for a closed port (pgxpool connects lazily).
func deadPostgres(t *testing.T) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/shop?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

type result struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request through the app. Documented routes are checked
// against openapi.yaml; headers are name, value pairs.
func (h *harness) do(t *testing.T, method, path string, body any, headers ...string) result {
	t.Helper()
	raw := encode(t, body)
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.app.Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	out, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(path, "/api/v1/test/") {
		openapitest.Check(t, req, raw, resp, out)
	}
	return result{resp.StatusCode, resp.Header, out}
}

func encode(t *testing.T, body any) []byte {
	t.Helper()
	switch b := body.(type) {
	case nil:
		return nil
	case string:
		return []byte(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
}

func bearer(access string) []string { return []string{"Authorization", "Bearer " + access} }

// want fails t unless r has the status and, for errors, the problem code.
func (r result) want(t *testing.T, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d: %s", r.status, status, r.body)
	}
	if code == "" {
		return
	}
	var p struct{ Code string }
	_ = json.Unmarshal(r.body, &p)
	if p.Code != code || r.header.Get("Content-Type") != server.ContentTypeProblem {
		t.Fatalf("problem code = %q (%s), want %q: %s", p.Code, r.header.Get("Content-Type"), code, r.body)
	}
	if status == http.StatusUnauthorized && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("401 without WWW-Authenticate: Bearer")
	}
	if status == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After")
	}
}

func (r result) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// mustCreate creates a user directly through the service.
func (h *harness) mustCreate(t *testing.T, email, role string) User {
	t.Helper()
	u, err := h.svc.CreateUser(context.Background(), email, testPassword, "", role)
	if err != nil {
		t.Fatalf("create %s: %v", email, err)
	}
	return u
}

const testPassword = "correct horse battery"

// shopper creates a shopper and logs it in from device.
func (h *harness) shopper(t *testing.T, email, device string) (User, Tokens) {
	t.Helper()
	return h.mustCreate(t, email, RoleShopper), h.login(t, email, device)
}

// login logs in over HTTP and returns the pair.
func (h *harness) login(t *testing.T, email, device string) Tokens {
	t.Helper()
	r := h.do(t, http.MethodPost, "/api/v1/auth/login", map[string]string{"email": email, "password": testPassword, "device": device})
	r.want(t, http.StatusOK, "")
	var tok Tokens
	r.decode(t, &tok)
	return tok
}

// me calls GET /me with the access token and returns the result.
func (h *harness) me(t *testing.T, access string) result {
	t.Helper()
	return h.do(t, http.MethodGet, "/api/v1/me", nil, bearer(access)...)
}

func (h *harness) refresh(t *testing.T, refresh string) result {
	t.Helper()
	return h.do(t, http.MethodPost, "/api/v1/auth/refresh", map[string]string{"refresh_token": refresh})
}

// isUnavailable reports whether err is answered 503.
func isUnavailable(err error) bool {
	var e *apperr.Error
	return errors.As(err, &e) && e.Code == apperr.CodeUnavailable
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
