package onetrip_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/testenv"
)

const testPassword = "correct horse battery"

// fixture is an auth service and its app behind the checks, limiting
// every client to a limit a minute, on rdb.
type fixture struct {
	svc   *auth.Service
	app   *fiber.App
	rdb   redis.UniversalClient
	trips *onetrip.Trips
}

// newFixture mounts auth's routes, GET /test/user and /test/admin behind
// RequireUser and RequireAdmin, and mount's routes as riding ones.
func newFixture(t testing.TB, rdb redis.UniversalClient, prefix string, limit int, mount func(fiber.Router, *onetrip.Trips)) *fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	svc := auth.New(db.Pool, rdb, auth.Config{Secret: []byte("test-secret-0123456789abcdef0123456789abcdef"),
		AccessTTL: 5 * time.Minute, SessionTTL: time.Hour, KeyPrefix: prefix, FastHashing: true}, log, reg)
	key := func(*fiber.Ctx) string { return "client" }
	trips := onetrip.New(onetrip.Config{
		Limiter: ratelimit.New(rdb, prefix, limit, time.Minute), Auth: svc, Redis: rdb,
		Options: server.LimiterOptions(reg, log, key, false), OneTrip: true, Reads: true,
	})
	deps := server.Deps{Log: log, Redis: rdb, DB: db.Pool, Registry: reg, BodyLimit: 1 << 16,
		Checks: trips.UpFront,
		Mount: []func(fiber.Router){svc.Routes, func(r fiber.Router) {
			whoami := func(c *fiber.Ctx) error { return c.JSON(auth.MustUser(c)) }
			r.Get("/test/user", svc.RequireUser(), whoami)
			r.Get("/test/admin", svc.RequireAdmin(), whoami)
		}}}
	if mount != nil {
		deps.OneTrip = []func(fiber.Router){func(r fiber.Router) { mount(r, trips) }}
	}
	return &fixture{svc: svc, app: server.New(deps), rdb: rdb, trips: trips}
}

// shopper creates a shopper and returns a fresh access token of theirs.
func (f *fixture) shopper(t testing.TB, email string) (auth.User, string) {
	t.Helper()
	ctx := context.Background()
	u, err := f.svc.CreateUser(ctx, email, testPassword, "", auth.RoleShopper)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.svc.Login(ctx, email, testPassword, "test")
	if err != nil {
		t.Fatal(err)
	}
	return u, tok.AccessToken
}

// do sends a request, with the bearer token when one is given.
func (f *fixture) do(t testing.TB, method, target, token string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := f.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// callCounter counts the calls a client sends to Redis (a pipeline is one).
type callCounter struct{ n atomic.Int64 }

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// counted is a client of r's server whose calls are counted.
func counted(t testing.TB, r *testenv.Redis) (*redis.Client, *callCounter) {
	t.Helper()
	c := redis.NewClient(r.Client.Options())
	t.Cleanup(func() { _ = c.Close() })
	calls := &callCounter{}
	c.AddHook(calls)
	return c, calls
}
