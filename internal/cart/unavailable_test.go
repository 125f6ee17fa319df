package cart

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/server"
)

type reply struct{ openapitest.Reply }

func wantProblem(t *testing.T, r reply, status int, code string) {
	t.Helper()
	openapitest.WantProblem(t, r.Reply, status, code)
}

// With Redis unreachable every cart route answers 503 with Retry-After,
// quickly: never a 500, a 401 or a hang.
func TestCartRedisDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.product(t, "p", 100) // in PostgreSQL, so the catalog can still answer
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	catalog := inventory.NewCatalog(f.db.Pool, dead, cache.New(dead, cache.Options{Prefix: "c:", TTL: time.Minute}, reg), "x:", log)
	orders := order.New(f.db.Pool, dead, inventory.NewStock(dead, "x:"), catalog.Exists, "x:", log, reg, order.Options{})
	svc := New(dead, catalog, orders, "x:", log, reg)
	// Auth needs Redis too; stand in for it so the cart's own answer shows.
	user := auth.User{ID: f.user(t), Role: auth.RoleShopper}
	asUser := func(c *fiber.Ctx) error {
		c.SetUserContext(auth.NewContextWithUser(c.UserContext(), user))
		return c.Next()
	}
	app := server.New(server.Deps{Log: log, Redis: dead, DB: f.db.Pool, Registry: reg, BodyLimit: 64 << 10,
		Mount: []func(fiber.Router){func(r fiber.Router) {
			svc.Routes(r, asUser)
			svc.OneTripRoutes(r, func(c *fiber.Ctx) error { return c.Next() }, asUser)
		}}})
	routes := []struct{ method, path, body string }{
		{"GET", "/api/v1/cart", ""},
		{"DELETE", "/api/v1/cart", ""},
		{"POST", "/api/v1/cart/items", `{"sku":"p","quantity":1}`},
		{"PUT", "/api/v1/cart/items/p", `{"quantity":2}`},
		{"PUT", "/api/v1/cart/items/p", `{"quantity":0}`},
		{"DELETE", "/api/v1/cart/items/p", ""},
		{"POST", "/api/v1/cart/checkout", ""},
	}
	for _, rt := range routes {
		start := time.Now()
		r := reply{openapitest.Do(t, app, rt.method, rt.path, "", rt.body, "Idempotency-Key", "k")}
		wantProblem(t, r, http.StatusServiceUnavailable, "unavailable")
		if r.Header.Get("Retry-After") == "" || time.Since(start) > 5*time.Second {
			t.Errorf("%s %s: Retry-After %q after %s", rt.method, rt.path, r.Header.Get("Retry-After"), time.Since(start))
		}
	}
}
