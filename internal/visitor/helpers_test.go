package visitor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/testenv"
)

// proxy is the address app.Test requests come from; trusting it lets a
// test pick each request's client IP with X-Forwarded-For.
var proxy = []string{"0.0.0.0"}

type fixture struct {
	s       *Service
	app     *fiber.App
	auth    *auth.Service
	catalog *inventory.Catalog
	r       *testenv.Redis
}

// newFixture wires the service as `shop serve` does, on its own Redis
// client vrdb when given (nil: the test Redis).
func newFixture(t *testing.T, vrdb redis.UniversalClient) *fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	if vrdb == nil {
		vrdb = r.Client
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	c := cache.New(r.Client, cache.Options{Prefix: r.Prefix + "cache:", TTL: time.Minute}, reg)
	catalog := inventory.NewCatalog(db.Pool, r.Client, c, r.Prefix, log)
	authSvc := auth.New(db.Pool, r.Client, auth.Config{Secret: []byte("test-secret-test-secret-test-secret"),
		AccessTTL: time.Minute, SessionTTL: time.Hour, KeyPrefix: r.Prefix, FastHashing: true}, log, reg)
	s := New(vrdb, Options{Prefix: r.Prefix, Exists: catalog.Exists, ClientIP: server.ClientIP(proxy, 64)}, log, reg)
	app := server.New(server.Deps{Log: log, Redis: r.Client, DB: db.Pool, Registry: reg, BodyLimit: 1 << 16,
		TrustedProxies: proxy,
		Mount: []func(fiber.Router){
			authSvc.Routes,
			func(r fiber.Router) { s.Routes(r, authSvc.OptionalUser(), adminOnly) },
			func(r fiber.Router) { catalog.OneTripRoutes(r, pass, pass) },
			func(r fiber.Router) { catalog.Routes(r, nil) },
		}})
	return &fixture{s: s, app: app, auth: authSvc, catalog: catalog, r: r}
}

// pass stands in for the product read's checks and OptionalUser, which
// the count route's own optionalUser does here.
func pass(c *fiber.Ctx) error { return c.Next() }

// adminOnly stands in for RequireAdmin: X-Test-Role: admin passes.
func adminOnly(c *fiber.Ctx) error {
	if c.Get("X-Test-Role") != "admin" {
		return apperr.NewError(apperr.CodeUnauthorized, "no credentials")
	}
	return c.Next()
}

func (f *fixture) product(t *testing.T, sku string) {
	t.Helper()
	if _, err := f.catalog.Create(context.Background(), sku, inventory.ProductInput{Name: sku, Category: "c", PriceCents: 1}); err != nil {
		t.Fatal(err)
	}
}

// token logs a new user in and returns the user id and access token.
func (f *fixture) token(t *testing.T, email string) (string, string) {
	t.Helper()
	u, err := f.auth.CreateUser(context.Background(), email, "a long password", "", auth.RoleShopper)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.auth.Login(context.Background(), email, "a long password", "")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID, tok.AccessToken
}

// read gets a product page from ip, with token when not empty.
func (f *fixture) read(t *testing.T, sku, ip, token string) int {
	t.Helper()
	return openapitest.Do(t, f.app, http.MethodGet, "/api/v1/products/"+sku, token, "", "X-Forwarded-For", ip).Status
}

func (f *fixture) report(t *testing.T, path string) Report {
	t.Helper()
	r := openapitest.Do(t, f.app, http.MethodGet, path, "", "", "X-Test-Role", "admin")
	if r.Status != http.StatusOK {
		t.Fatalf("%s: %d %s", path, r.Status, r.Body)
	}
	var rep Report
	if err := json.Unmarshal(r.Body, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func dropped(s *Service, reason string) float64 {
	return testutil.ToFloat64(s.m.dropped.WithLabelValues(reason))
}
