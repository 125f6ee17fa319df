package onetrip_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/testenv"
)

// sessionKey is the Redis key of the session an access token names.
func sessionKey(t *testing.T, prefix, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		SID string `json:"sid"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.SID == "" {
		t.Fatalf("token claims %s: %v", payload, err)
	}
	return prefix + "session:" + claims.SID
}

// An authenticated request costs one call to Redis: the session check rides
// in the limiter's script. It slides the session's idle expiry when the
// request is allowed and, once the client is limited, does nothing at all.
func TestSessionCheckRidesWithTheLimiter(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb, calls := counted(t, r)
	f := newFixture(t, rdb, r.Prefix, 5, nil)
	u, token := f.shopper(t, "ada@example.com")
	ctx := context.Background()
	session := sessionKey(t, r.Prefix, token)

	if res := f.do(t, http.MethodGet, "/api/v1/me", token); res.StatusCode != http.StatusOK { // loads the script
		t.Fatalf("GET /me: %d", res.StatusCode)
	}
	calls.n.Store(0)
	res := f.do(t, http.MethodGet, "/api/v1/me", token)
	var got struct{ ID string }
	_ = json.NewDecoder(res.Body).Decode(&got)
	if n := calls.n.Load(); n != 1 || got.ID != u.ID {
		t.Fatalf("GET /me: %d calls to Redis, user %q; want 1 call and %q", n, got.ID, u.ID)
	}

	const short = 50 * time.Second
	r.Client.PExpire(ctx, session, short)
	f.do(t, http.MethodGet, "/api/v1/me", token) // request 3
	if ttl := r.Client.PTTL(ctx, session).Val(); ttl <= short {
		t.Fatalf("after an allowed request the session expires in %s, want the idle expiry slid", ttl)
	}
	f.do(t, http.MethodGet, "/api/v1/me", token)
	if res := f.do(t, http.MethodGet, "/api/v1/test/admin", token); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a shopper's admin request: %d, want 403", res.StatusCode)
	}

	r.Client.PExpire(ctx, session, short)
	if res := f.do(t, http.MethodGet, "/api/v1/me", token); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("over the limit: %d, want 429", res.StatusCode)
	}
	if ttl := r.Client.PTTL(ctx, session).Val(); ttl > short {
		t.Fatalf("a limited request slid the session's expiry to %s", ttl)
	}
}

// wrapped is a client that is not a *redis.Client, like a cluster client:
// the session check must not ride (its keys may sit on other nodes), so an
// authenticated request pays the window's call and its own.
type wrapped struct{ *redis.Client }

func TestSessionCheckStaysOffOtherClients(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb, calls := counted(t, r)
	f := newFixture(t, wrapped{rdb}, r.Prefix, 100, nil)
	_, token := f.shopper(t, "ada@example.com")
	f.do(t, http.MethodGet, "/api/v1/me", token) // loads the scripts
	calls.n.Store(0)
	if res := f.do(t, http.MethodGet, "/api/v1/me", token); res.StatusCode != http.StatusOK || calls.n.Load() != 2 {
		t.Fatalf("GET /me: %d after %d calls; want 200 after 2 (the window, the session)", res.StatusCode, calls.n.Load())
	}
}

// Each riding route runs its own step in its checks' call; a request over
// the limit runs none.
func TestStepsRunTheirOwnScript(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	incr := onetrip.NewStep(`return {redis.call('INCR', KEYS[1]), ARGV[1]}`)
	route := func(name string) fiber.Handler {
		return func(c *fiber.Ctx) error {
			reply, ran, err := onetrip.Of(c).Run(c.UserContext(), incr, []string{r.Prefix + "runs:" + name}, []any{name})
			if err != nil || !ran {
				return err
			}
			vals, _ := reply.([]any)
			if len(vals) != 2 || vals[1] != name {
				return c.Status(http.StatusConflict).SendString("the step answered wrong")
			}
			return c.SendString(name)
		}
	}
	f := newFixture(t, r.Client, r.Prefix, 3, func(rt fiber.Router, trips *onetrip.Trips) {
		rt.Get("/a", trips.Ride, route("a"))
		rt.Get("/b", trips.Ride, route("b"))
	})
	runs := func(name string) int64 {
		n, _ := r.Client.Get(context.Background(), r.Prefix+"runs:"+name).Int64()
		return n
	}
	for _, p := range []string{"/a", "/b", "/a"} {
		if res := f.do(t, http.MethodGet, "/api/v1"+p, ""); res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p, res.StatusCode)
		}
	}
	if runs("a") != 2 || runs("b") != 1 {
		t.Fatalf("steps ran a %d, b %d times; want 2 and 1", runs("a"), runs("b"))
	}
	if res := f.do(t, http.MethodGet, "/api/v1/b", ""); res.StatusCode != http.StatusTooManyRequests || runs("b") != 1 {
		t.Fatalf("over the limit: %d, b ran %d times; want 429 and 1", res.StatusCode, runs("b"))
	}
}

// A read whose checks could not run up front (Redis down) is let through
// by the limiter, as every GET is, but its session is still checked: the
// guard answers 503, never admits on a check that did not run.
func TestUpFrontOutageNeverAdmits(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	_, token := newFixture(t, r.Client, r.Prefix, 100, nil).shopper(t, "ada@example.com")
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	f := newFixture(t, dead, r.Prefix, 100, nil)
	if res := f.do(t, http.MethodGet, "/api/v1/test/user", token); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET with Redis down: %d, want 503", res.StatusCode)
	}
}

// A riding signed-in route that answers without its step (a ticket read
// from the room's snapshot) settles its checks after the route; when
// that call fails, a GET's window fails open, but the session was never
// checked: a revoked token must get 503, never the route's answer, as up
// front. A POST is refused by the window already.
func TestRideOutageNeverAdmits(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	live := newFixture(t, r.Client, r.Prefix, 100, nil)
	_, token := live.shopper(t, "ada@example.com")
	if res := live.do(t, http.MethodPost, "/api/v1/auth/logout", token); res.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	var f *fixture
	f = newFixture(t, dead, r.Prefix, 100, func(rt fiber.Router, trips *onetrip.Trips) {
		answer := func(c *fiber.Ctx) error {
			if err := onetrip.Of(c).Settle(); err != nil {
				return err
			}
			return c.JSON(auth.MustUser(c))
		}
		rt.Get("/snapshot", trips.Ride, func(c *fiber.Ctx) error { return f.svc.RequireUser()(c) }, answer)
		rt.Post("/snapshot", trips.Ride, func(c *fiber.Ctx) error { return f.svc.RequireUser()(c) }, answer)
	})
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		if res := f.do(t, m, "/api/v1/snapshot", token); res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s of a riding route with Redis down and a revoked token: %d, want 503", m, res.StatusCode)
		}
	}
}

// Checks that refused stay refused: a route that tries its step again
// after a refusal (a retry loop) gets the refusal again, never its step
// alone.
func TestChecksRefuseAgainAfterARefusal(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	incr := onetrip.NewStep(`return redis.call('INCR', KEYS[1])`)
	key := r.Prefix + "runs"
	f := newFixture(t, r.Client, r.Prefix, 1, func(rt fiber.Router, trips *onetrip.Trips) {
		rt.Get("/retry", trips.Ride, func(c *fiber.Ctx) error {
			ck := onetrip.Of(c)
			_, _, first := ck.Run(c.UserContext(), incr, []string{key}, nil)
			if _, ran, err := ck.Run(c.UserContext(), incr, []string{key}, nil); err == nil && !ran {
				// The checks passed earlier: the step runs alone.
				if err := r.Client.Incr(c.UserContext(), key).Err(); err != nil {
					return err
				}
			}
			if first != nil {
				return first
			}
			return c.SendStatus(http.StatusNoContent)
		})
	})
	if res := f.do(t, http.MethodGet, "/api/v1/retry", ""); res.StatusCode != http.StatusNoContent {
		t.Fatalf("first request: %d, want 204", res.StatusCode)
	}
	if res := f.do(t, http.MethodGet, "/api/v1/retry", ""); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request, over the limit: %d, want 429", res.StatusCode)
	}
	if n, _ := r.Client.Get(context.Background(), key).Int64(); n != 2 {
		t.Fatalf("the step ran %d times; want 2, both for the allowed request", n)
	}
}
