package ratelimit

import (
	"context"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
)

// Deferred checks: the window, the companion and a route's own first Redis
// step (a write, or a read) in one script call.
// More in docs/design/ratelimit.md ("deferred.go").

// followedLua runs the window, the companion, the companion's admission and
// the follower, each a local function taking KEYS and ARGV as parameters
// (shadowing the globals). It answers the window's triple when it refuses;
// {1, remaining, 0, companion reply} when the companion does not admit; {1,
// remaining, 0, companion reply (false when none), follower reply} when the
// follower ran; an error reply of the companion or the follower as it is.
// More in docs/design/ratelimit.md ("deferred.go").
const followedLua = `#!lua
local function window(KEYS, ARGV)
%s
end
local function companion(KEYS, ARGV)
%s
end
local function admits(reply, KEYS, ARGV)
%s
end
local function follower(KEYS, ARGV)
%s
end
local r = window({KEYS[1]}, {ARGV[1], ARGV[2], ARGV[3]})
if r.err or r[1] ~= 1 then
  return r
end
local nk, na = tonumber(ARGV[4]), tonumber(ARGV[5])
local c = false
local k, a = 2, 6
if nk >= 0 then
  local ck, ca = {}, {}
  for i = 1, nk do ck[i] = KEYS[k]; k = k + 1 end
  for i = 1, na do ca[i] = ARGV[a]; a = a + 1 end
  c = companion(ck, ca)
  if type(c) == 'table' and c.err then
    return c
  end
  local ok = admits(c, ck, ca)
  if c == nil then
    c = false
  end
  if not ok then
    return {r[1], r[2], r[3], c}
  end
end
local fk, fa = {}, {}
for i = k, #KEYS do fk[#fk + 1] = KEYS[i] end
for i = a, #ARGV do fa[#fa + 1] = ARGV[i] end
local f = follower(fk, fa)
if type(f) == 'table' and f.err then
  return f
end
return {r[1], r[2], r[3], c, f}
`

// Deferral is one kind of deferred request: those Match accepts, whose
// route runs Follower after the check (Deferred.Run). A leading shebang
// line of Follower is dropped: the combined script carries its own.
// Name tells the route's code which follower the request's check carries
// (DeferredFrom), so that code reached by another deferred route (a
// purchase that reads the catalog) never runs its script in that
// route's check.
type Deferral struct {
	Name     string
	Match    func(*fiber.Ctx) bool
	Follower string
}

// deferring is one Deferral's combined script.
type deferring struct {
	name   string
	match  func(*fiber.Ctx) bool
	w      *withCompanion
	script *redis.Script
}

// deferringFor returns the middleware's deferrals, or nil when o defers
// nothing or the companion cannot serve them (see Options.Defer).
func (l *Limiter) deferringFor(o *Options, w *withCompanion) []*deferring {
	if len(o.Defer) == 0 || w == nil || !w.c.defers() {
		return nil
	}
	out := make([]*deferring, 0, len(o.Defer))
	for _, d := range o.Defer {
		if d.Match == nil || d.Follower == "" {
			continue
		}
		out = append(out, &deferring{name: d.Name, match: d.Match, w: w,
			script: redis.NewScript(combinedLua(w.c, d.Follower))})
	}
	return out
}

// deferralOf is the first of gs that defers c, or nil.
func deferralOf(gs []*deferring, c *fiber.Ctx) *deferring {
	for _, g := range gs {
		if g.match(c) {
			return g
		}
	}
	return nil
}

func combinedLua(c *Companion, follower string) string {
	return fmt.Sprintf(followedLua, windowLua, c.Lua, c.Admit, dropShebang(follower))
}

// dropShebang drops a script's first line when it is a shebang, which
// only the first line of a whole script may be.
func dropShebang(lua string) string {
	if !strings.HasPrefix(lua, "#!") {
		return lua
	}
	if i := strings.IndexByte(lua, '\n'); i >= 0 {
		return lua[i+1:]
	}
	return ""
}

// Deferred is one request's check, waiting for its route (see above). It
// belongs to the request's goroutine.
type Deferred struct {
	g      *deferring
	o      *Options
	c      *fiber.Ctx
	client string
	// The companion's keys and arguments for the request, when it has any.
	keys     []string
	args     []any
	prepared bool
	// ran: the check ran (in Run or settle); answer is what it refused
	// the request with, nil when it passed.
	ran    bool
	answer error
}

type deferredKey struct{}

// DeferredFrom returns the deferred check of the request whose context is
// ctx when it was deferred by the Deferral named name (whose Follower
// Run runs), or nil.
func DeferredFrom(ctx context.Context, name string) *Deferred {
	d, _ := ctx.Value(deferredKey{}).(*Deferred)
	if d == nil || d.g.name != name {
		return nil
	}
	return d
}

// serve runs c's route with its check deferred, then the check alone if
// the route did not run it, and answers what the check refused with, or
// the route's answer.
func (g *deferring) serve(c *fiber.Ctx, o *Options) error {
	d := &Deferred{g: g, o: o, c: c, client: o.Key(c)}
	d.keys, d.args, d.prepared = g.w.c.Prepare(c)
	c.SetUserContext(context.WithValue(c.UserContext(), deferredKey{}, d))
	if d.prepared {
		g.w.c.Deferred(c, d.settle)
	}
	err := c.Next()
	if answer := d.settle(); answer != nil {
		return answer
	}
	return err
}

// settle runs the check alone (window and companion) unless it ran, and
// returns its refusal or nil.
func (d *Deferred) settle() error {
	if d.ran {
		return d.answer
	}
	d.ran = true
	ctx, cancel := context.WithTimeout(d.c.UserContext(), d.o.Timeout)
	defer cancel()
	var res Result
	var err error
	if d.prepared {
		res, err = d.g.w.run(ctx, d.c, d.client, d.keys, d.args)
	} else {
		res, err = d.g.w.l.Allow(ctx, d.client)
	}
	if pass, answer := d.o.decide(d.c, res, err); !pass {
		d.answer = answer
		return answer
	}
	if d.prepared {
		d.answer = d.g.w.c.Verdict(d.c)
	}
	return d.answer
}

// Run runs the check and, when it passes, the follower with keys and
// args, in one script call, within the middleware's timeout. ran is false
// when the check has already run (an earlier Run, or settle): the caller
// then runs its script on its own. Otherwise reply is the follower's, or
// err is the check's refusal (the follower did not run), or a Redis error
// (whether the follower ran is unknown, as for any failed script call).
func (d *Deferred) Run(ctx context.Context, keys []string, args []any) (reply any, ran bool, err error) {
	if d.ran {
		return nil, false, nil
	}
	d.ran = true
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	l := d.g.w.l
	nk, na := -1, 0
	if d.prepared {
		nk, na = len(d.keys), len(d.args)
	}
	allKeys := make([]string, 0, 1+len(d.keys)+len(keys))
	allKeys = append(append(append(allKeys, l.key(d.client)), d.keys...), keys...)
	allArgs := make([]any, 0, 5+len(d.args)+len(args))
	allArgs = append(allArgs, l.window.Milliseconds(), l.limit, l.member(), nk, na)
	allArgs = append(append(allArgs, d.args...), args...)
	vals, err := d.g.script.Run(ctx, l.run, allKeys, allArgs...).Slice()
	if err != nil {
		if d.o.OnError != nil {
			d.o.OnError(err)
		}
		return nil, true, fmt.Errorf("ratelimit %s: %w", d.client, err)
	}
	return d.read(vals)
}

// read reads the combined script's answer (see followedLua).
func (d *Deferred) read(vals []any) (reply any, ran bool, err error) {
	res, err := d.g.w.l.result(vals)
	if err != nil {
		return nil, true, err
	}
	if pass, answer := d.o.decide(d.c, res, nil); !pass {
		d.answer = answer
		return nil, true, answer
	}
	if d.prepared {
		if len(vals) < 4 {
			return nil, true, fmt.Errorf("ratelimit: combined script answered %v", vals)
		}
		d.g.w.c.Done(d.c, vals[3])
		if d.answer = d.g.w.c.Verdict(d.c); d.answer != nil {
			return nil, true, d.answer
		}
	}
	if len(vals) < 5 {
		return nil, true, fmt.Errorf("ratelimit: the follower did not run although the check passed: %v", vals)
	}
	return vals[4], true, nil
}

// Settle runs the check alone unless it has run (in Run or an earlier
// Settle), for a route that answers without its follower, and returns its
// refusal or nil.
func (d *Deferred) Settle() error { return d.settle() }

// Refusal is what the check refused the request with: nil when it passed
// or has not run.
func (d *Deferred) Refusal() error { return d.answer }
