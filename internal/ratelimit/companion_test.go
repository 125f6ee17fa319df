package ratelimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/testenv"
)

// counterLua is a companion that writes, so a test can see whether it ran:
// it adds ARGV[1] to KEYS[1] and answers {new value, ARGV[2]}; given
// ARGV[2] == "nil" it answers nil, given "err" an error reply.
const counterLua = `
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[2] == 'nil' then return nil end
if ARGV[2] == 'err' then return redis.error_reply('ERR companion refused') end
return {n, ARGV[2]}
`

type companionRun struct {
	prepared, done int
	reply          any
}

// companionApp limits GET /x to limit requests a minute, with the counter
// companion; the request's ?mode= is the companion's ARGV[2] and ?skip=1
// makes Prepare decline.
func companionApp(rdb redis.UniversalClient, prefix string, limit int, run *companionRun) *fiber.App {
	l := ratelimit.New(rdb, prefix, limit, time.Minute)
	app := fiber.New()
	app.Use(l.Middleware(ratelimit.Options{
		Key:         func(*fiber.Ctx) string { return "client" },
		Limited:     func(c *fiber.Ctx, _ int) error { return c.SendStatus(http.StatusTooManyRequests) },
		Unavailable: func(c *fiber.Ctx, _ error) error { return c.SendStatus(http.StatusServiceUnavailable) },
		Companion: &ratelimit.Companion{
			Lua: counterLua,
			Prepare: func(c *fiber.Ctx) ([]string, []any, bool) {
				run.prepared++
				if c.Query("skip") == "1" {
					return nil, nil, false
				}
				return []string{prefix + "counter"}, []any{5, c.Query("mode")}, true
			},
			Done: func(_ *fiber.Ctx, reply any) { run.done++; run.reply = reply },
		},
	}))
	app.Get("/x", func(c *fiber.Ctx) error { return c.SendString("ok") })
	return app
}

func get(t *testing.T, app *fiber.App, target string) int {
	t.Helper()
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, target, nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// The companion runs in the limiter's script only for allowed requests, with
// its own keys and arguments, and its reply reaches Done as it was.
func TestCompanionRidesOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx := context.Background()
	var run companionRun
	app := companionApp(r.Client, r.Prefix, 4, &run)
	counter := func() int64 { n, _ := r.Client.Get(ctx, r.Prefix+"counter").Int64(); return n }

	if code := get(t, app, "/x?mode=hello"); code != 200 || run.done != 1 || counter() != 5 {
		t.Fatalf("allowed: %d, done %d, counter %d", code, run.done, counter())
	}
	if v, ok := run.reply.([]any); !ok || len(v) != 2 || v[0] != int64(5) || v[1] != "hello" {
		t.Fatalf("reply = %#v, want [5 hello]", run.reply)
	}
	if code := get(t, app, "/x?mode=nil"); code != 200 || run.done != 2 || run.reply != nil || counter() != 10 {
		t.Fatalf("nil answer: %d, done %d, reply %#v, counter %d", code, run.done, run.reply, counter())
	}
	// Declined: the window still counts the request; nothing else runs.
	if code := get(t, app, "/x?skip=1"); code != 200 || run.done != 2 || counter() != 10 {
		t.Fatalf("declined: %d, done %d, counter %d", code, run.done, counter())
	}
	// An error reply from the companion is the limiter's error: a GET
	// fails open, Done is not called.
	if code := get(t, app, "/x?mode=err"); code != 200 || run.done != 2 {
		t.Fatalf("companion error: %d, done %d", code, run.done)
	}
	// The window is full (4 allowed): the companion must not run.
	if code := get(t, app, "/x?mode=late"); code != http.StatusTooManyRequests || run.done != 2 || counter() != 15 {
		t.Fatalf("limited: %d, done %d, counter %d (the erroring call counted once)", code, run.done, counter())
	}
	if run.prepared != 5 {
		t.Fatalf("Prepare called %d times, want 5", run.prepared)
	}
}

// wrapped is a client that is not a *redis.Client, like a cluster client:
// the companion must not ride (its keys may sit on other nodes).
type wrapped struct{ *redis.Client }

func TestCompanionStaysOffOtherClients(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	var run companionRun
	app := companionApp(wrapped{r.Client}, r.Prefix, 4, &run)
	if code := get(t, app, "/x?mode=hello"); code != 200 || run.prepared != 0 || run.done != 0 {
		t.Fatalf("%d, prepared %d, done %d: want the window alone", code, run.prepared, run.done)
	}
	if n := r.Client.Exists(context.Background(), r.Prefix+"counter").Val(); n != 0 {
		t.Fatal("the companion ran")
	}
}
