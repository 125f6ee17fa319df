package ratelimit

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
)

// Companion is a small script that rides in the limiter's round trip. One
// script runs the window and then, only when the request is allowed, the
// companion, so a limited request still does nothing else while an allowed
// one saves a round trip to Redis. The shop uses it for the session check
// that every authenticated request needs (BENCHMARKS.md: each round trip
// was about a sixth of a purchase's server CPU).
//
// Both scripts' keys go in one EVALSHA, which Redis Cluster refuses unless
// they share a slot; so the companion rides only on a client of one Redis
// server (*redis.Client, also what a Sentinel failover client is). On a
// cluster the middleware leaves it out and the companion's owner makes its
// own call.
type Companion struct {
	// Lua is the companion's script. It sees its own KEYS and ARGV (those
	// returned by Prepare) and may return nil, an array or an error reply.
	Lua string
	// Prepare returns the companion's keys and arguments for a request, or
	// ok false when there is nothing to run for it.
	Prepare func(c *fiber.Ctx) (keys []string, args []any, ok bool)
	// Done receives the companion's reply (nil for a Lua nil) when it ran.
	Done func(c *fiber.Ctx, reply any)

	// The rest serves deferred checks (Options.Defer, deferred.go); a
	// companion without them is never deferred. A Deferral's script runs
	// the route's step only when the companion admits the request, which
	// must agree with Verdict.
	// Deferred tells the companion's owner that c's check waits for its
	// route; settle runs it now (window and companion alone) and returns
	// the answer that replaces the route's (429, 503, Verdict's), or nil.
	Deferred func(c *fiber.Ctx, settle func() error)
	// Verdict, called after Done for a deferred request, returns the
	// answer that replaces the route's when the companion refuses the
	// request (the shop's: 401 for a revoked session), or nil.
	Verdict func(c *fiber.Ctx) error
}

// defers says whether the companion can serve a deferred check.
func (c *Companion) defers() bool {
	return c != nil && c.Deferred != nil && c.Verdict != nil
}

// composedLua wraps the window and the companion in local functions that
// take KEYS and ARGV as parameters (shadowing the globals), then runs the
// companion only after an allowed window. Keys: the window's, then the
// companion's; arguments: the window's three, then the companion's.
// The answer is the window's triple, plus the companion's reply when it ran.
const composedLua = `local function window(KEYS, ARGV)
%s
end
local function companion(KEYS, ARGV)
%s
end
local r = window({KEYS[1]}, {ARGV[1], ARGV[2], ARGV[3]})
if r.err or r[1] ~= 1 then
  return r
end
local ck, ca = {}, {}
for i = 2, #KEYS do ck[i - 1] = KEYS[i] end
for i = 4, #ARGV do ca[i - 3] = ARGV[i] end
local c = companion(ck, ca)
if type(c) == 'table' and c.err then
  return c
end
if c == nil then
  c = false
end
return {r[1], r[2], r[3], c}
`

// withCompanion is the limiter's script combined with a companion's.
type withCompanion struct {
	l      *Limiter
	c      *Companion
	script *redis.Script
}

// companionFor returns the combined script, or nil when the companion
// cannot ride on this client (see Companion).
func (l *Limiter) companionFor(c *Companion) *withCompanion {
	if c == nil {
		return nil
	}
	if _, single := l.rdb.(*redis.Client); !single {
		return nil
	}
	return &withCompanion{l: l, c: c, script: redis.NewScript(fmt.Sprintf(composedLua, windowLua, c.Lua))}
}

// allow is Allow with the companion's keys and arguments. reply is the
// companion's answer and ran says whether it ran (only when allowed).
func (w *withCompanion) allow(ctx context.Context, client string, keys []string, args []any) (res Result, reply any, ran bool, err error) {
	l := w.l
	vals, err := w.script.Run(ctx, l.run,
		append([]string{l.key(client)}, keys...),
		append([]any{l.window.Milliseconds(), l.limit, l.member()}, args...)...).Slice()
	if err != nil {
		return Result{}, nil, false, fmt.Errorf("ratelimit %s: %w", client, err)
	}
	res, err = l.result(vals)
	if err != nil || len(vals) < 4 {
		return res, nil, false, err
	}
	return res, vals[3], true, nil
}
