package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/testenv"
)

func newTestApp(t *testing.T, rdb redis.UniversalClient) *fiber.App {
	t.Helper()
	db := testenv.NewDatabase(t)
	if rdb == nil {
		rdb = testenv.NewRedis(t).Client
	}
	return server.New(server.Deps{
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Redis:     rdb,
		DB:        db.Pool,
		Registry:  prometheus.NewRegistry(),
		BodyLimit: 1024,
		Mount: []func(fiber.Router){func(r fiber.Router) {
			r.Get("/test/panic", func(*fiber.Ctx) error { panic("secret internals") })
			r.Post("/test/echo", func(c *fiber.Ctx) error {
				var v struct {
					Quantity int `json:"quantity"`
				}
				if err := server.Decode(c, &v); err != nil {
					return err
				}
				return c.JSON(v)
			})
		}},
	})
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, app *fiber.App, req *http.Request, check bool) result {
	t.Helper()
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if check {
		openapitest.Check(t, req, reqBody, resp, body)
	}
	return result{resp.StatusCode, resp.Header, body}
}

func problemOf(t *testing.T, r result) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != server.ContentTypeProblem {
		t.Fatalf("Content-Type = %q, want %s (body %s)", ct, server.ContentTypeProblem, r.body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.body)
	}
	return m
}

func TestOperationalRoutes(t *testing.T) {
	t.Parallel()
	app := newTestApp(t, nil)
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml", "/metrics"} {
		r := do(t, app, httptest.NewRequest(http.MethodGet, path, nil), true)
		if r.status != http.StatusOK {
			t.Errorf("GET %s = %d, want 200: %s", path, r.status, r.body)
		}
		if r.header.Get(server.HeaderRequestID) == "" {
			t.Errorf("GET %s: no X-Request-ID", path)
		}
	}
	r := do(t, app, httptest.NewRequest(http.MethodGet, "/metrics", nil), false)
	for _, want := range []string{`shop_http_requests_total{method="GET",route="/healthz",status="200"} 1`, "shop_pg_pool_max_conns", "shop_redis_pool_total_conns"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestReadyzNamesTheFailingStore(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	app := newTestApp(t, dead)
	r := do(t, app, httptest.NewRequest(http.MethodGet, "/readyz", nil), true)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want 503", r.status)
	}
	p := problemOf(t, r)
	if failed, _ := p["failed"].([]any); len(failed) != 1 || failed[0] != "redis" {
		t.Errorf("failed = %v, want [redis]", p["failed"])
	}
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on 503")
	}
}

func TestErrorsAreProblems(t *testing.T) {
	t.Parallel()
	app := newTestApp(t, nil)
	tests := []struct {
		name   string
		req    *http.Request
		status int
		code   string
	}{
		{"unknown_route", httptest.NewRequest(http.MethodGet, "/nope", nil), 404, "not_found"},
		{"unknown_api_route", httptest.NewRequest(http.MethodGet, "/api/v1/nope", nil), 404, "not_found"},
		{"wrong_method", httptest.NewRequest(http.MethodDelete, "/healthz", nil), 405, "method_not_allowed"},
		{"panic", httptest.NewRequest(http.MethodGet, "/api/v1/test/panic", nil), 500, "internal"},
		{"malformed_json", jsonReq(`{"quantity":`), 400, "invalid_request"},
		{"not_an_object", jsonReq(`[1,2]`), 400, "invalid_request"},
		{"wrong_type", jsonReq(`{"quantity":"two"}`), 400, "invalid_request"},
		{"out_of_range", jsonReq(`{"quantity":1e40}`), 400, "invalid_request"},
		{"trailing_data", jsonReq(`{"quantity":1} {}`), 400, "invalid_request"},
		{"empty", jsonReq(``), 400, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, app, tc.req, false)
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", r.status, tc.status, r.body)
			}
			p := problemOf(t, r)
			if p["code"] != tc.code || int(p["status"].(float64)) != tc.status {
				t.Errorf("problem = %v, want code %s", p, tc.code)
			}
			if strings.Contains(string(r.body), "secret internals") {
				t.Errorf("the 500 shows internals: %s", r.body)
			}
			if tc.code == "invalid_request" {
				if errs, _ := p["errors"].([]any); len(errs) == 0 {
					t.Errorf("invalid_request without errors: %s", r.body)
				}
			}
		})
	}
}

func TestUnknownFieldsAreIgnored(t *testing.T) {
	t.Parallel()
	app := newTestApp(t, nil)
	r := do(t, app, jsonReq(`{"quantity":3,"price_cents":1}`), false)
	if r.status != 200 || string(r.body) != `{"quantity":3}` {
		t.Fatalf("got %d %s", r.status, r.body)
	}
}

// A client's X-Request-ID is echoed when it is 1–128 visible ASCII
// characters; anything else gets a fresh id, never the client's bytes.
func TestRequestIDIsEchoedWhenSound(t *testing.T) {
	t.Parallel()
	app := newTestApp(t, nil)
	tests := []struct {
		name, sent string
		echoed     bool
	}{
		{"plain", "client-id-42", true},
		{"128_chars", strings.Repeat("a", 128), true},
		{"punctuation", "a!~{}[]=:;\"'<>", true},
		{"129_chars", strings.Repeat("a", 129), false},
		{"4_KB", strings.Repeat("b", 3500), false},
		{"nul", "abc\x00def", false},
		{"inner_space", "abc def", false},
		{"tab", "abc\tdef", false},
		{"del", "abc\x7f", false},
		{"non_ascii", "caf\u00e9", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/nope", nil)
			req.Header.Set(server.HeaderRequestID, tc.sent)
			r := do(t, app, req, false)
			got := r.header.Get(server.HeaderRequestID)
			if tc.echoed && got != tc.sent {
				t.Fatalf("X-Request-ID = %q, want the client's %q", got, tc.sent)
			}
			if !tc.echoed && (got == tc.sent || !soundID(got)) {
				t.Fatalf("X-Request-ID = %q for %q, want a fresh id", got, tc.sent)
			}
			if p := problemOf(t, r); p["request_id"] != got {
				t.Errorf("problem request_id = %v, header %q", p["request_id"], got)
			}
		})
	}
}

func soundID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, b := range []byte(s) {
		if b < 0x21 || b > 0x7e {
			return false
		}
	}
	return true
}

// The HTTP layer's own answers (a body over the limit, headers over the
// read buffer, a request fasthttp cannot parse) are made before any
// middleware runs: they too carry X-Request-ID and a problem document.
func TestHTTPLayerErrorsCarryRequestID(t *testing.T) {
	t.Parallel()
	addr := listen(t, newTestApp(t, nil)) // 1 KiB body limit
	tests := []struct {
		name   string
		req    string
		status int
		code   string
		echo   string
	}{
		{"body_over_limit", "POST /api/v1/test/echo HTTP/1.1\r\nHost: shop\r\nX-Request-ID: big-1\r\nContent-Length: 5000\r\n\r\n",
			413, "payload_too_large", "big-1"},
		{"body_over_limit_bad_id", "POST /api/v1/test/echo HTTP/1.1\r\nHost: shop\r\nX-Request-ID: " + strings.Repeat("z", 300) + "\r\nContent-Length: 5000\r\n\r\n",
			413, "payload_too_large", ""},
		{"headers_too_large", "GET /healthz HTTP/1.1\r\nHost: shop\r\nX-Pad: " + strings.Repeat("p", 16<<10) + "\r\n\r\n",
			431, "headers_too_large", ""},
		{"malformed", "GET /healthz HTTP/1.1\r\nHost: shop\r\nContent-Length: ten\r\n\r\n", 400, "invalid_request", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := writeThenRead(t, addr, []byte(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			r := result{resp.StatusCode, resp.Header, body}
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", r.status, tc.status, body)
			}
			if p := problemOf(t, r); p["code"] != tc.code {
				t.Errorf("code = %v, want %s", p["code"], tc.code)
			}
			got := r.header.Get(server.HeaderRequestID)
			if !soundID(got) || (tc.echo != "" && got != tc.echo) {
				t.Errorf("X-Request-ID = %q, want %q or a fresh id", got, tc.echo)
			}
		})
	}
}

func jsonReq(body string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/api/v1/test/echo", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

// Metric labels must not alias Fiber's reused request buffers: after many
// requests of mixed methods the registry still gathers cleanly.
func TestMetricLabelsSurviveBufferReuse(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	db := testenv.NewDatabase(t)
	app := server.New(server.Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: testenv.NewRedis(t).Client,
		DB: db.Pool, Registry: reg, BodyLimit: 1024,
	})
	for i := range 60 {
		method := []string{http.MethodGet, http.MethodPost, http.MethodDelete}[i%3]
		resp, err := app.Test(httptest.NewRequest(method, "/healthz", nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}
