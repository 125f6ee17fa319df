// Package ratelimit is an exact per-client sliding-window limiter shared by
// every instance through Redis, and its Fiber middleware.
//
// The reasoning behind it is in docs/design/ratelimit.md.
package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed window.lua
var windowLua string

var windowScript = redis.NewScript(windowLua)

// WindowLua is the window's script, for internal/onetrip to run as the
// first part of its script. KEYS[1] is the client's window; ARGV its three
// arguments (Window).
func WindowLua() string { return windowLua }

// Limiter allows Limit requests per client in any sliding Window.
type Limiter struct {
	rdb redis.UniversalClient
	// run is where the window script runs: rdb, or an auto-pipeliner of it
	// (RunOn).
	run    redis.Scripter
	prefix string
	limit  int
	window time.Duration
	// seq and boot make members unique across requests and processes.
	seq  atomic.Uint64
	boot string
}

// New returns a limiter whose keys start with prefix. window must be at
// least a millisecond when limit > 0. A limit of 0 is the limiter off: it
// counts nothing and allows every request without a call to Redis; its
// window script run inside another (Window) allows all and writes nothing.
func New(rdb redis.UniversalClient, prefix string, limit int, window time.Duration) *Limiter {
	return &Limiter{
		rdb: rdb, run: rdb, prefix: prefix, limit: limit, window: window,
		boot: strconv.FormatInt(time.Now().UnixNano(), 36),
	}
}

// Off says whether the limiter counts nothing (a limit of 0).
func (l *Limiter) Off() bool { return l.limit == 0 }

// RunOn makes the limiter run its script on c, an auto-pipeliner of the
// limiter's client, and returns l. Its other commands stay on the client
// itself.
func (l *Limiter) RunOn(c redis.Scripter) *Limiter {
	l.run = c
	return l
}

// Result is the outcome of one Allow call.
type Result struct {
	Allowed   bool
	Limit     int
	Remaining int
	// RetryAfter is how long until a request would be allowed (when denied).
	RetryAfter time.Duration
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1:
// the value of a Retry-After header.
func (r Result) RetryAfterSeconds() int {
	return max(1, int((r.RetryAfter+time.Second-1)/time.Second))
}

// Allow counts one request of client and says whether it may proceed. It
// returns an error only when Redis does not answer.
func (l *Limiter) Allow(ctx context.Context, client string) (Result, error) {
	res, _, err := l.Take(ctx, client)
	return res, err
}

// Attempt is one counted request, which Refund can take back.
type Attempt struct {
	key, member string
}

// Take is Allow that also returns the attempt, for Refund. When the request
// is not allowed nothing was counted, and the Attempt is zero.
func (l *Limiter) Take(ctx context.Context, client string) (Result, Attempt, error) {
	if l.Off() {
		return Result{Allowed: true}, Attempt{}, nil
	}
	a := Attempt{key: l.key(client), member: l.member()}
	vals, err := windowScript.Run(ctx, l.run, []string{a.key}, l.window.Milliseconds(), l.limit, a.member).Slice()
	if err != nil {
		return Result{}, Attempt{}, fmt.Errorf("ratelimit %s: %w", client, err)
	}
	res, err := l.result(vals)
	if err != nil || !res.Allowed {
		return res, Attempt{}, err
	}
	return res, a, nil
}

// Refund takes back an attempt: it no longer counts against its client's
// window. Refunding a zero Attempt does nothing. It returns an error only
// when Redis does not answer.
func (l *Limiter) Refund(ctx context.Context, a Attempt) error {
	if a.key == "" {
		return nil
	}
	if err := l.rdb.ZRem(ctx, a.key, a.member).Err(); err != nil {
		return fmt.Errorf("ratelimit refund: %w", err)
	}
	return nil
}

// key is the client's window. The hash tag keeps it in one cluster slot.
func (l *Limiter) key(client string) string { return l.prefix + "rl:{" + client + "}" }

// member is unique to one request, across requests and processes.
func (l *Limiter) member() string { return l.boot + ":" + strconv.FormatUint(l.seq.Add(1), 36) }

// Window is the window script's key and arguments for one request of
// client, for a script that runs it inside its own (internal/onetrip);
// Result reads its answer. With the limiter off the member is empty:
// the script then counts nothing.
func (l *Limiter) Window(client string) (key string, args []any) {
	member := ""
	if !l.Off() {
		member = l.member()
	}
	return l.key(client), []any{l.window.Milliseconds(), l.limit, member}
}

// Result reads the window script's {allowed, remaining, retry_after_ms}.
func (l *Limiter) Result(vals []any) (Result, error) { return l.result(vals) }

// result reads the window script's {allowed, remaining, retry_after_ms}.
func (l *Limiter) result(vals []any) (Result, error) {
	var n [3]int64
	for i := range n {
		if i >= len(vals) {
			return Result{}, fmt.Errorf("ratelimit: script answered %v", vals)
		}
		v, ok := vals[i].(int64)
		if !ok {
			return Result{}, fmt.Errorf("ratelimit: script answered %v", vals)
		}
		n[i] = v
	}
	return Result{
		Allowed:    n[0] == 1,
		Limit:      l.limit,
		Remaining:  int(n[1]),
		RetryAfter: time.Duration(n[2]) * time.Millisecond,
	}, nil
}
