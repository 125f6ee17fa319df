package writer

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
)

// A batch of 100 orders is confirmed in script calls of at most 32 orders
// each (a third of a millisecond of Redis), not one call for the batch:
// Redis runs a script whole, and every purchase arriving meanwhile waits
// it out (BENCHMARKS.md, issue 32). Every order ends confirmed and every
// entry acknowledged.
func TestConfirmHoldsRedisBriefly(t *testing.T) {
	t.Parallel()
	f, round, u := newSale(t, 100)
	placed := f.placeN(t, u, "s", 100, 1)
	var calls confirmCalls
	w := f.writer("w1", Options{Batch: 1000})
	w.rdb.AddHook(&calls)
	r := start(w)
	f.drained(t)
	r.Stop(t)
	f.wantWritten(t, round, 100, 100)
	for _, p := range placed {
		if o, err := f.svc.Get(context.Background(), u, p.OrderID); err != nil || o.Status != order.StatusConfirmed {
			t.Fatalf("%s: %+v %v, want confirmed", p.OrderID, o, err)
		}
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	if len(calls.orders) == 0 || slices.Max(calls.orders) > 32 {
		t.Errorf("confirm script calls of %v orders, want at most 32 each", calls.orders)
	}
}

// confirmCalls is a go-redis hook that notes the orders of each confirm
// script call (its keys: the stream, then two per order).
type confirmCalls struct {
	mu     sync.Mutex
	orders []int
}

func (c *confirmCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *confirmCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 2 && a[1] == confirmScript.Hash() {
			if n, ok := a[2].(int); ok {
				c.mu.Lock()
				c.orders = append(c.orders, (n-1)/2)
				c.mu.Unlock()
			}
		}
		return next(ctx, cmd)
	}
}

func (c *confirmCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
