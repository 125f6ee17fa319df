package ratelimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/testenv"
)

// incrScript keeps Deferral's contract with no companion: the window,
// then a step that counts its runs in its first key and answers the count
// with its first argument.
var incrScript = fmt.Sprintf(`local function window(KEYS, ARGV)
%s
end
local r = window({KEYS[1]}, {ARGV[1], ARGV[2], ARGV[3]})
if r.err or r[1] ~= 1 then
  return r
end
if tonumber(ARGV[4]) ~= -1 then
  return redis.error_reply('ERR no companion expected')
end
return {r[1], r[2], r[3], false, {redis.call('INCR', KEYS[2]), ARGV[6]}}
`, ratelimit.WindowLua())

// deferringApp limits every client to limit requests a minute and defers
// GET /a and GET /b, each with its own script (Deferral "a", "b"). Each
// route asks for the deferred check of both names and runs its own; it
// answers 200 with the step's argument, or the check's refusal. The
// companion never has anything to run (Prepare declines): the window and
// the step run alone.
func deferringApp(rdb redis.UniversalClient, prefix string, limit int) *fiber.App {
	l := ratelimit.New(rdb, prefix, limit, time.Minute)
	path := func(p string) func(*fiber.Ctx) bool { return func(c *fiber.Ctx) bool { return c.Path() == p } }
	app := fiber.New()
	app.Use(l.Middleware(ratelimit.Options{
		Key: func(*fiber.Ctx) string { return "client" },
		// Errors, as the shop's are: Run hands the refusal to the route.
		Limited:     func(*fiber.Ctx, int) error { return fiber.NewError(http.StatusTooManyRequests) },
		Unavailable: func(*fiber.Ctx, error) error { return fiber.NewError(http.StatusServiceUnavailable) },
		Companion: &ratelimit.Companion{
			Lua:      `return nil`,
			Prepare:  func(*fiber.Ctx) ([]string, []any, bool) { return nil, nil, false },
			Done:     func(*fiber.Ctx, any) {},
			Deferred: func(*fiber.Ctx, func() error) {},
			Verdict:  func(*fiber.Ctx) error { return nil },
		},
		Defer: []ratelimit.Deferral{
			{Name: "a", Match: path("/a"), Script: incrScript},
			{Name: "b", Match: path("/b"), Script: incrScript},
		},
	}))
	route := func(own, other string) fiber.Handler {
		return func(c *fiber.Ctx) error {
			ctx := c.UserContext()
			if ratelimit.DeferredOf(c, other) != nil {
				return c.Status(http.StatusConflict).SendString("the check carries " + other + "'s script")
			}
			d := ratelimit.DeferredOf(c, own)
			if d == nil {
				return c.Status(http.StatusConflict).SendString("not deferred")
			}
			reply, ran, err := d.Run(ctx, []string{prefix + "runs:" + own}, []any{own})
			if err != nil || !ran {
				return err
			}
			vals, _ := reply.([]any)
			if len(vals) != 2 {
				return c.Status(http.StatusConflict).SendString(fmt.Sprintf("the step answered %v", reply))
			}
			return c.SendString(vals[1].(string))
		}
	}
	app.Get("/a", route("a", "b"))
	app.Get("/b", route("b", "a"))
	return app
}

// Each deferred route runs its own script in its check's call, never
// another deferral's; a request over the limit runs none.
func TestDeferralsRunTheirOwnScript(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx := context.Background()
	app := deferringApp(r.Client, r.Prefix, 3)
	runs := func(name string) int64 { n, _ := r.Client.Get(ctx, r.Prefix+"runs:"+name).Int64(); return n }
	for _, p := range []string{"/a", "/b", "/a"} {
		if code, body := getBody(t, app, p); code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
	}
	if runs("a") != 2 || runs("b") != 1 {
		t.Fatalf("steps ran a %d, b %d times; want 2 and 1", runs("a"), runs("b"))
	}
	if code := get(t, app, "/b"); code != http.StatusTooManyRequests || runs("b") != 1 {
		t.Fatalf("over the limit: %d, b ran %d times; want 429 and 1", code, runs("b"))
	}
}

func getBody(t *testing.T, app *fiber.App, target string) (int, string) {
	t.Helper()
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, target, nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
