package bestseller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A batch of a thousand orders is recorded in script calls of at most 16
// orders each (a quarter of a millisecond of Redis): Redis runs a script
// whole, and every purchase arriving meanwhile waits it out (BENCHMARKS.md,
// issue 32). Orders of two
// days in one batch are all counted, and each day's marks expire when that
// day's orders ask.
func TestRecordHoldsRedisBriefly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var calls scriptCalls
	f.r.Client.AddHook(&calls)
	var orders []Order
	for i := range 1000 {
		at := fixedNow
		if i%3 == 0 {
			at = day(-1)
		}
		orders = append(orders, ord(fmt.Sprintf("o%d", i), at, Line{"p", 1}))
	}
	res, err := f.s.Record(context.Background(), orders)
	if err != nil || res.Applied != 1000 {
		t.Fatalf("%+v %v, want 1000 applied", res, err)
	}
	if got := f.board(t, All)["p"]; got != 1000 {
		t.Errorf("all-time board: %d units, want 1000", got)
	}
	if most := calls.most(); most > 16 {
		t.Errorf("%d script calls of up to %d orders, want calls of at most 16", len(calls.orders), most)
	}
	for _, d := range []time.Time{fixedNow, day(-1)} {
		got := f.r.Client.ExpireTime(context.Background(), f.s.keys.marks(d)).Val()
		if want := markExpiry(d, fixedNow); got != time.Duration(want.Unix())*time.Second {
			t.Errorf("marks of %s expire at %v, want %v", d.Format(time.DateOnly), got, want.Unix())
		}
	}
}

// scriptCalls is a go-redis hook that notes the orders of each record
// script call (ARGV[2] days, then the orders' count after them).
type scriptCalls struct {
	mu     sync.Mutex
	orders []int
}

func (c *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 3 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			keys := toInt(a[2])
			argv := a[3+keys:]
			pos := 2 // after the mode and the days' count
			for range toInt(argv[1]) {
				pos += 2
				pos += 1 + 2*toInt(argv[pos])
			}
			c.mu.Lock()
			c.orders = append(c.orders, toInt(argv[pos]))
			c.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (c *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *scriptCalls) most() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.orders) == 0 {
		return 0
	}
	return slices.Max(c.orders)
}

func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case string:
		i, err := strconv.Atoi(n)
		if err != nil {
			return -1
		}
		return i
	}
	return -1
}
