package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/racetest"
	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/testenv"
)

// 200 requests from one client released together: exactly `limit` pass.
func TestAllowIsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	const limit, callers = 37, 200
	l := ratelimit.New(r.Client, r.Prefix, limit, time.Minute)

	var allowed, denied atomic.Int64
	racetest.Together(racetest.Times(callers, func(int) {
		res, err := l.Allow(context.Background(), "10.0.0.1")
		if err != nil {
			t.Error(err)
			return
		}
		if res.Allowed {
			allowed.Add(1)
		} else {
			denied.Add(1)
		}
	})...)
	if allowed.Load() != limit || denied.Load() != callers-limit {
		t.Fatalf("allowed %d, denied %d; want exactly %d and %d", allowed.Load(), denied.Load(), limit, callers-limit)
	}
	// Another client has its own window.
	if res, err := l.Allow(context.Background(), "10.0.0.2"); err != nil || !res.Allowed || res.Remaining != limit-1 {
		t.Fatalf("other client: %+v %v", res, err)
	}
}

func TestWindowSlides(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	const window = 400 * time.Millisecond
	l := ratelimit.New(r.Client, r.Prefix, 3, window)
	ctx := context.Background()
	for i := range 3 {
		res, err := l.Allow(ctx, "c")
		if err != nil || !res.Allowed || res.Remaining != 2-i {
			t.Fatalf("request %d: %+v %v", i+1, res, err)
		}
	}
	res, err := l.Allow(ctx, "c")
	if err != nil || res.Allowed {
		t.Fatalf("4th request allowed: %+v %v", res, err)
	}
	if res.RetryAfter <= 0 || res.RetryAfter > window {
		t.Fatalf("RetryAfter = %s, want within (0, %s]", res.RetryAfter, window)
	}
	time.Sleep(res.RetryAfter + 20*time.Millisecond)
	if res, err := l.Allow(ctx, "c"); err != nil || !res.Allowed {
		t.Fatalf("after the window slid: %+v %v", res, err)
	}
	// Denied requests were not recorded: the key holds only allowed ones.
	n, err := r.Client.ZCard(ctx, r.Prefix+"rl:{c}").Result()
	if err != nil || n > 3 {
		t.Fatalf("window holds %d entries (%v), want at most 3", n, err)
	}
	if ttl := r.Client.PTTL(ctx, r.Prefix+"rl:{c}").Val(); ttl <= 0 || ttl > window {
		t.Fatalf("window key TTL = %s, want within the window", ttl)
	}
}

// A refunded attempt no longer counts; a denied attempt has nothing to
// refund, so refunding it frees nothing.
func TestRefundGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	l := ratelimit.New(r.Client, r.Prefix, 2, time.Minute)
	ctx := context.Background()
	take := func() (ratelimit.Result, ratelimit.Attempt) {
		t.Helper()
		res, a, err := l.Take(ctx, "acct")
		if err != nil {
			t.Fatal(err)
		}
		return res, a
	}
	first, a1 := take()
	take()
	denied, a3 := take()
	if !first.Allowed || denied.Allowed || denied.RetryAfterSeconds() < 1 || denied.RetryAfterSeconds() > 60 {
		t.Fatalf("first %+v, third %+v: want allowed, then denied with Retry-After in 1..60 s", first, denied)
	}
	if err := l.Refund(ctx, a3); err != nil {
		t.Fatal(err)
	}
	if res, _ := take(); res.Allowed {
		t.Fatal("refunding a denied attempt freed a slot")
	}
	if err := l.Refund(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if res, _ := take(); !res.Allowed || res.Remaining != 0 {
		t.Fatalf("after a refund: %+v, want allowed with 0 remaining", res)
	}
}

// A limit of 0 is the limiter off: it allows everything, writes nothing,
// and its window script, run as a one-trip script's first step, allows
// without touching the window's key.
func TestLimitZeroIsOff(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	l := ratelimit.New(r.Client, r.Prefix, 0, 0)
	ctx := context.Background()
	for range 3 {
		if res, err := l.Allow(ctx, "c"); err != nil || !res.Allowed || res.Limit != 0 {
			t.Fatalf("off: %+v %v", res, err)
		}
	}
	vals, err := r.Client.Eval(ctx, ratelimit.WindowLua(), []string{r.Prefix + "w"}, 0, 0, "m").Slice()
	if err != nil || len(vals) != 3 || vals[0] != int64(1) {
		t.Fatalf("window script with limit 0: %v %v", vals, err)
	}
	if keys, err := r.Client.Keys(ctx, r.Prefix+"*").Result(); err != nil || len(keys) > 0 {
		t.Fatalf("the limiter off wrote %v (%v)", keys, err)
	}
}
