package shop_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/config"
)

// pipelineSpy counts the scripts a client runs by their keys: the reserve
// script alone and the limiter's alone inside pipelines (which is how its
// auto-pipeliner, only the purchase path's, sends them; first key the
// order stream or a window), and both in one call (a window first, the
// order stream after: the one-trip purchase, internal/onetrip), with those of
// them it sent inside pipelines. A call Redis answered NOSCRIPT (the
// script not yet in the shared server's cache, or flushed from it) is not
// counted: the client sends it again as EVAL, and that one is.
type pipelineSpy struct {
	prefix                                string
	reserve, limiter, combined, pipelined atomic.Int64
}

func (s *pipelineSpy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *pipelineSpy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		err := next(ctx, c)
		s.count(c, false)
		return err
	}
}

func (s *pipelineSpy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			s.count(c, true)
		}
		return err
	}
}

func (s *pipelineSpy) count(c redis.Cmder, pipelined bool) {
	args := c.Args()
	if len(args) < 4 || (args[0] != "evalsha" && args[0] != "eval") || redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
		return
	}
	n, _ := args[2].(int)
	keys := make([]string, 0, n)
	for _, k := range args[3:min(len(args), 3+n)] {
		key, _ := k.(string)
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return
	}
	orders := false
	for _, k := range keys[1:] {
		orders = orders || strings.HasPrefix(k, s.prefix+"orders")
	}
	switch {
	case strings.HasPrefix(keys[0], s.prefix+"orders") && pipelined:
		// Outside pipelines the writer's and sweeper's scripts on the
		// stream; inside, only the purchase path's.
		s.reserve.Add(1)
	case strings.HasPrefix(keys[0], s.prefix+"rl:") && orders:
		s.combined.Add(1)
		if pipelined {
			s.pipelined.Add(1)
		}
	case strings.HasPrefix(keys[0], s.prefix+"rl:") && pipelined:
		s.limiter.Add(1)
	}
}

// With SHOP_REDIS_PIPELINE on (the default), a purchase's one script (the
// limiter's window, the session check and the reservation) rides the auto-pipeliner
// with several batches in flight, and a race of shoppers released together
// sells exactly the stock: every reply reached its own caller.
func TestPipelinedPurchasesSellExactlyTheStock(t *testing.T) {
	t.Parallel()
	a, spy := spiedApp(t, config.RateLimit{Limit: 1 << 20, Window: 10 * time.Second})
	const units, shoppers = 40, 120
	a.Sale(t, "pipe", 100, units, 1)
	tokens := make([]string, shoppers)
	for i := range tokens {
		_, tokens[i] = a.Shopper(t, fmt.Sprintf("pipe%d@example.com", i))
	}
	base := a.Serve(t)

	got := burst(t, shoppers, "purchase", []int{http.StatusAccepted, http.StatusConflict},
		func(i int) *http.Request { return purchaseRequest(base, "pipe", tokens[i]) })
	accepted, soldOut := got[http.StatusAccepted], got[http.StatusConflict]
	if accepted != units || soldOut != shoppers-units {
		t.Fatalf("accepted %d, sold out %d; want %d and %d", accepted, soldOut, units, shoppers-units)
	}
	// One script per purchase: the limiter's window, the session check
	// and the reservation in one call, through the auto-pipeliner (a
	// first EVALSHA answered NOSCRIPT is sent again as EVAL).
	if spy.combined.Load() < shoppers || spy.pipelined.Load() == 0 || spy.reserve.Load() != 0 || spy.limiter.Load() != 0 {
		t.Fatalf("scripts: combined %d (pipelined %d), reserve alone %d, limiter alone %d; want one combined call per purchase, through the auto-pipeliner",
			spy.combined.Load(), spy.pipelined.Load(), spy.reserve.Load(), spy.limiter.Load())
	}
	a.Drain(t)
	var orders, sold int64
	ctx := context.Background()
	if err := a.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if err := a.DB.Pool.QueryRow(ctx, `SELECT sold FROM sale_rounds WHERE sku = 'pipe'`).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	left, err := a.Redis.Client.HGet(ctx, a.Stock.SaleKey("pipe"), "available").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if orders != units || sold != units || left != 0 {
		t.Fatalf("orders %d, sold %d, available %d; want %d, %d, 0", orders, sold, left, units, units)
	}
}
