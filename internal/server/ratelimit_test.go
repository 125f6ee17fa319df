package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/testenv"
)

func limitedApp(t *testing.T, rdb redis.UniversalClient, prefix string, limit int, trusted []string) *fiber.App {
	t.Helper()
	return limitedAppWith(t, rdb, prefix, limit, trusted, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func limitedAppWith(t *testing.T, rdb redis.UniversalClient, prefix string, limit int, trusted []string, v6bits int, log *slog.Logger) *fiber.App {
	t.Helper()
	db := testenv.NewDatabase(t)
	return server.New(server.Deps{
		Log:            log,
		IPv6Prefix:     v6bits,
		Redis:          rdb,
		DB:             db.Pool,
		Registry:       prometheus.NewRegistry(),
		BodyLimit:      1 << 16,
		TrustedProxies: trusted,
		Limiter:        ratelimit.New(rdb, prefix, limit, time.Minute),
		Mount: []func(fiber.Router){func(r fiber.Router) {
			r.Get("/ping", func(c *fiber.Ctx) error { return c.SendString("pong") })
			r.Post("/ping", func(c *fiber.Ctx) error { return c.SendString("pong") })
		}},
	})
}

func ping(t *testing.T, app *fiber.App, method, xff string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, "/api/v1/ping", nil)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// From an untrusted peer, a different X-Forwarded-For on every request
// changes nothing: all count against the socket address.
func TestSpoofedForwardedForIsIgnored(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	app := limitedApp(t, r.Client, r.Prefix, 5, nil)
	for i := range 5 {
		resp := ping(t, app, http.MethodGet, fmt.Sprintf("203.0.113.%d", i))
		if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "5" ||
			resp.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(4-i) {
			t.Fatalf("request %d: %d limit=%q remaining=%q", i+1, resp.StatusCode,
				resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"))
		}
	}
	resp := ping(t, app, http.MethodGet, "198.51.100.7")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("6th request = %d, want 429", resp.StatusCode)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		t.Fatalf("Retry-After = %q", resp.Header.Get("Retry-After"))
	}
	body, _ := io.ReadAll(resp.Body)
	if p := problemOf(t, result{resp.StatusCode, resp.Header, body}); p["code"] != "rate_limited" {
		t.Fatalf("problem = %v", p)
	}
	// Health and metrics are not limited.
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, _ := app.Test(httptest.NewRequest(http.MethodGet, path, nil), -1)
		if resp.StatusCode != 200 {
			t.Errorf("%s = %d while limited", path, resp.StatusCode)
		}
	}
}

// Behind a trusted proxy, each forwarded client has its own window, and the
// client cannot escape it by prepending addresses of its own.
func TestTrustedProxyForwardsClients(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	// app.Test's connections come from 0.0.0.0: make that the proxy.
	app := limitedApp(t, r.Client, r.Prefix, 2, []string{"0.0.0.0"})
	for range 2 {
		if resp := ping(t, app, http.MethodGet, "192.0.2.1"); resp.StatusCode != 200 {
			t.Fatalf("client 1: %d", resp.StatusCode)
		}
	}
	if resp := ping(t, app, http.MethodGet, "10.9.9.9, 192.0.2.1"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("client 1 with a forged hop prepended: %d, want 429", resp.StatusCode)
	}
	if resp := ping(t, app, http.MethodGet, "192.0.2.2"); resp.StatusCode != 200 {
		t.Fatalf("client 2: %d, want its own window", resp.StatusCode)
	}
}

// Redis down: state-changing requests fail closed with 503, reads pass.
func TestLimiterFailsClosedForWrites(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	app := limitedApp(t, dead, "x:", 5, nil)
	if resp := ping(t, app, http.MethodPost, ""); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("POST with Redis down = %d, want 503 with Retry-After", resp.StatusCode)
	}
	if resp := ping(t, app, http.MethodGet, ""); resp.StatusCode != 200 {
		t.Fatalf("GET with Redis down = %d, want 200 (fail open)", resp.StatusCode)
	}
}
