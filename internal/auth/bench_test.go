package auth

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkVerifyToken measures what every authenticated request pays: the
// bearer JWT's signature and claims check, then the session check script's
// round trip to Redis. Results: BENCHMARKS.md.
func BenchmarkVerifyToken(b *testing.B) {
	r := testenv.NewRedis(b)
	db := testenv.NewDatabase(b)
	cfg := Config{Secret: testSecret, AccessTTL: testAccessTTL, SessionTTL: testSessionTTL, KeyPrefix: r.Prefix}
	svc := New(db.Pool, r.Client, cfg, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	ctx := context.Background()
	if _, err := svc.CreateUser(ctx, "bench@example.com", testPassword, "", RoleShopper); err != nil {
		b.Fatal(err)
	}
	tok, err := svc.Login(ctx, "bench@example.com", testPassword, "bench")
	if err != nil {
		b.Fatal(err)
	}
	header := "Bearer " + tok.AccessToken
	b.ReportAllocs()
	b.SetParallelism(25) // 50 callers on 2 cores, like redis-benchmark -c 50
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.authenticate(ctx, header, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAuthenticatedRequest is what every authenticated request pays
// before its handler, through the whole Fiber app (no socket): the rate
// limiter and the session check, with the check riding in the limiter's
// script (as `shop serve` runs) and, for comparison, in a round trip of its
// own. Results: BENCHMARKS.md.
func BenchmarkAuthenticatedRequest(b *testing.B) {
	r := testenv.NewRedis(b)
	db := testenv.NewDatabase(b)
	cfg := Config{Secret: testSecret, AccessTTL: testAccessTTL, SessionTTL: testSessionTTL, KeyPrefix: r.Prefix, FastHashing: true}
	log := slog.New(slog.DiscardHandler)
	svc := New(db.Pool, r.Client, cfg, log, prometheus.NewRegistry())
	ctx := context.Background()
	u, err := svc.CreateUser(ctx, "bench@example.com", testPassword, "", RoleShopper)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := svc.Login(ctx, "bench@example.com", testPassword, "bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name      string
		companion *ratelimit.Companion
	}{
		{"one_round_trip", svc.LimiterCompanion()},
		{"two_round_trips", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			app := server.New(server.Deps{
				Log: log, Redis: r.Client, DB: db.Pool, Registry: prometheus.NewRegistry(), BodyLimit: 1 << 16,
				Limiter:          ratelimit.New(r.Client, r.Prefix+bc.name+":", 1<<30, time.Minute),
				LimiterCompanion: bc.companion,
				Mount: []func(fiber.Router){func(rt fiber.Router) {
					rt.Get("/whoami", svc.RequireUser(), func(c *fiber.Ctx) error { return c.SendString(MustUser(c).ID) })
				}},
			})
			h := app.Handler()
			b.ReportAllocs()
			b.SetParallelism(25) // 50 callers on 2 cores, like redis-benchmark -c 50
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var rc fasthttp.RequestCtx
					rc.Request.Header.SetMethod(http.MethodGet)
					rc.Request.SetRequestURI("/api/v1/whoami")
					rc.Request.Header.Set(fiber.HeaderAuthorization, "Bearer "+tok.AccessToken)
					h(&rc)
					if rc.Response.StatusCode() != http.StatusOK || string(rc.Response.Body()) != u.ID {
						b.Fatalf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
					}
				}
			})
		})
	}
}
