package onetrip

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/ratelimit"
)

// Checks are one request's checks: the client its window counts and,
// when the request bears a valid access token on a single Redis, its
// session check. They belong to the request's goroutine. Every method
// may be called on nil (no checks left to carry: they ran up front).
type Checks struct {
	t       *Trips
	c       *fiber.Ctx
	client  string
	session *auth.SessionCheck // nil: none rides
	// verdict: a session that does not admit the request refuses it (401),
	// for a signed-in route whose guard admitted it on the check's promise.
	verdict bool
	ran     bool
	refusal error
}

type checksKey struct{}

// Of returns c's checks when they wait for its route's step (Ride), or
// nil when they ran up front.
func Of(c *fiber.Ctx) *Checks {
	ck, _ := c.Locals(checksKey{}).(*Checks)
	return ck
}

// Run runs the checks and, when they pass, step with keys and args, in one
// script call within the limiter's timeout. ran is false when the checks
// have already run (an earlier Run, or Settle): the caller then runs its
// step alone. Otherwise reply is the step's, or err is the checks'
// refusal (Refusal; the step did not run), or a Redis error (whether the
// step ran is unknown, as for any failed script call). Checks that have
// run and refused answer their refusal again, with ran true.
func (ck *Checks) Run(ctx context.Context, step *Step, keys []string, args []any) (reply any, ran bool, err error) {
	if ck == nil {
		return nil, false, nil
	}
	if ck.ran { // a refusal stands: the step must not run alone after it
		return nil, ck.refusal != nil, ck.refusal
	}
	ck.ran = true
	ctx, cancel := context.WithTimeout(ctx, ck.t.o.Timeout)
	defer cancel()
	k, a := ck.call(keys, args)
	vals, err := step.script.Run(ctx, ck.t.run, k, a...).Slice()
	if err != nil {
		if ck.t.o.OnError != nil {
			ck.t.o.OnError(err)
		}
		return nil, true, fmt.Errorf("ratelimit %s: %w", ck.client, err)
	}
	out, err := ck.outcome(vals)
	if err != nil {
		return nil, true, err
	}
	if ck.refusal = ck.judge(out, nil); ck.refusal != nil {
		return nil, true, ck.refusal
	}
	if len(vals) < 5 {
		return nil, true, fmt.Errorf("one trip: the step did not run although the checks passed: %v", vals)
	}
	return vals[4], true, nil
}

// Settle runs the checks alone unless they have run (in Run or an earlier
// Settle), for a route that answers without its step, and returns their
// refusal or nil.
func (ck *Checks) Settle() error {
	if ck == nil {
		return nil
	}
	if ck.ran {
		return ck.refusal
	}
	ck.ran = true
	ctx, cancel := context.WithTimeout(ck.c.UserContext(), ck.t.o.Timeout)
	defer cancel()
	out, err := ck.alone(ctx)
	ck.refusal = ck.judge(out, err)
	return ck.refusal
}

// Refusal is what the checks refused the request with: nil when they
// passed or have not run.
func (ck *Checks) Refusal() error {
	if ck == nil {
		return nil
	}
	return ck.refusal
}

// outcome is what the checks answered: the window's result and, when
// one rode along, the session check's reply.
type outcome struct {
	res     ratelimit.Result
	reply   any
	checked bool
}

// alone runs the checks without a step: the window and the session check
// in one call, or the window alone when no session check rides.
func (ck *Checks) alone(ctx context.Context) (outcome, error) {
	if ck.session == nil {
		res, err := ck.t.l.Allow(ctx, ck.client)
		return outcome{res: res}, err
	}
	k, a := ck.call(nil, nil)
	vals, err := checksAlone.script.Run(ctx, ck.t.run, k, a...).Slice()
	if err != nil {
		return outcome{}, fmt.Errorf("ratelimit %s: %w", ck.client, err)
	}
	return ck.outcome(vals)
}

// call is trip.lua's KEYS and ARGV for the checks and a step's keys and
// args.
func (ck *Checks) call(keys []string, args []any) ([]string, []any) {
	wkey, wargs := ck.t.l.Window(ck.client)
	var sk []string
	var sa []any
	nk := -1
	if ck.session != nil {
		sk, sa = ck.t.auth.SessionCheckArgs(ck.session)
		nk = len(sk)
	}
	public := "1"
	if ck.verdict {
		public = "0"
	}
	allKeys := make([]string, 0, 1+len(sk)+len(keys))
	allKeys = append(append(append(allKeys, wkey), sk...), keys...)
	allArgs := make([]any, 0, len(wargs)+3+len(sa)+len(args))
	allArgs = append(append(allArgs, wargs...), nk, len(sa), public)
	return allKeys, append(append(allArgs, sa...), args...)
}

// outcome reads trip.lua's answer.
func (ck *Checks) outcome(vals []any) (outcome, error) {
	res, err := ck.t.l.Result(vals)
	if err != nil || !res.Allowed || ck.session == nil {
		return outcome{res: res}, err
	}
	if len(vals) < 4 {
		return outcome{}, fmt.Errorf("one trip: the checks answered %v", vals)
	}
	return outcome{res: res, reply: vals[3], checked: true}, nil
}

// judge turns the checks' outcome into the refusal that replaces the
// route's answer, or nil: 429 or 503 first (ratelimit.Options.Decide,
// which also sets the X-RateLimit headers), then, for a signed-in route's
// deferred check, 401 for a session that does not admit the request. It
// hands the session check's reply to the guards (auth.SessionCheck).
func (ck *Checks) judge(out outcome, err error) error {
	if pass, answer := ck.t.o.Decide(ck.c, out.res, err); !pass {
		return answer
	}
	if err != nil && ck.verdict && ck.session != nil {
		// The window fails open for a GET, but a signed-in route's guard
		// admitted the request on this check's promise: no answer, no
		// admission (503, as the guard answers up front).
		return ck.t.o.Unavailable(ck.c, err)
	}
	if err != nil || !out.checked {
		return nil
	}
	ck.session.Reply, ck.session.Ran = out.reply, true
	if !ck.verdict {
		return nil
	}
	_, err = ck.session.User()
	return err
}
