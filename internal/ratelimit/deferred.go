package ratelimit

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
)

// Deferred checks: the window, the companion and a route's own first Redis
// step (a write, or a read) in one script call.
// More in docs/design/ratelimit.md ("deferred.go").

// Deferral is one kind of deferred request: those Match accepts, whose
// route runs Script, the check and its own first step in one call
// (Deferred.Run). Name tells the route which script the request's check
// carries (DeferredOf).
type Deferral struct {
	Name  string
	Match func(*fiber.Ctx) bool
	// Script's KEYS: the window's key, the companion's (ARGV[4] of them;
	// -1: none), the route's. ARGV: the window's three, the companion's
	// key and argument counts and arguments, the route's. It answers the
	// window's triple when the window refuses, {1, remaining, 0, companion
	// reply} when the companion does not admit the request, else {1,
	// remaining, 0, companion reply or false, the route's reply}.
	Script string
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
		if d.Match == nil || d.Script == "" {
			continue
		}
		out = append(out, &deferring{name: d.Name, match: d.Match, w: w, script: redis.NewScript(d.Script)})
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

// DeferredOf returns c's deferred check when the Deferral named name
// deferred it (its Script is what Run runs), or nil. A route takes it here
// and hands it down as a parameter.
func DeferredOf(c *fiber.Ctx, name string) *Deferred {
	d, _ := c.Locals(deferredKey{}).(*Deferred)
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
	c.Locals(deferredKey{}, d)
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

// Run runs the check and, when it passes, the route's step with keys and
// args, in one script call, within the middleware's timeout. ran is false
// when the check has already run (an earlier Run, or settle): the caller
// then runs its step on its own. Otherwise reply is the step's, or err is
// the check's refusal (the step did not run), or a Redis error (whether
// the step ran is unknown, as for any failed script call).
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
	member := "" // the limit off: the window step reads no member
	if !l.Off() {
		member = l.member()
	}
	allArgs = append(allArgs, l.window.Milliseconds(), l.limit, member, nk, na)
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

// read reads the script's answer (see Deferral).
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
		return nil, true, fmt.Errorf("ratelimit: the route's step did not run although the check passed: %v", vals)
	}
	return vals[4], true, nil
}

// Settle runs the check alone unless it has run (in Run or an earlier
// Settle), for a route that answers without its step, and returns its
// refusal or nil.
func (d *Deferred) Settle() error { return d.settle() }

// Refusal is what the check refused the request with: nil when it passed
// or has not run.
func (d *Deferred) Refusal() error { return d.answer }
