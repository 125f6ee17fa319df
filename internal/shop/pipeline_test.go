package shop_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// pipelineSpy counts the scripts a client runs inside pipelines (which is
// how its auto-pipeliner sends them) by their first key.
type pipelineSpy struct {
	prefix           string
	reserve, limiter atomic.Int64
}

func (s *pipelineSpy) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (s *pipelineSpy) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (s *pipelineSpy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			args := c.Args()
			if len(args) < 4 || (args[0] != "evalsha" && args[0] != "eval") {
				continue
			}
			switch key, _ := args[3].(string); {
			case key == s.prefix+"orders":
				s.reserve.Add(1)
			case strings.HasPrefix(key, s.prefix+"rl:"):
				s.limiter.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// With SHOP_REDIS_PIPELINE on (the default), both of a purchase's scripts (the limiter
// with the session check, and the reserve script) ride the auto-pipeliner
// with several batches in flight, and a race of shoppers released together
// sells exactly the stock: every reply reached its own caller.
func TestPipelinedPurchasesSellExactlyTheStock(t *testing.T) {
	t.Parallel()
	stores := shoptest.NewStores(t)
	spy := &pipelineSpy{prefix: stores.Redis.Prefix}
	rdb := redis.NewClient(stores.Redis.Client.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(spy)
	a := shoptest.New(t, shoptest.Options{Stores: stores, Redis: rdb, Config: func(c *config.Config) {
		c.RateLimit = config.RateLimit{Limit: 1 << 20, Window: 10 * time.Second}
	}})
	const units, shoppers = 40, 120
	a.Sale(t, "pipe", 100, units, 1)
	tokens := make([]string, shoppers)
	for i := range tokens {
		_, tokens[i] = a.Shopper(t, fmt.Sprintf("pipe%d@example.com", i))
	}
	base := a.Serve(t)

	var accepted, soldOut atomic.Int64
	var wg sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan error, shoppers)
	for i := range shoppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			req, _ := http.NewRequest("POST", base+"/api/v1/products/pipe/purchase", strings.NewReader(`{"quantity":1}`))
			req.Header.Set("Authorization", "Bearer "+tokens[i])
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			_ = res.Body.Close()
			switch res.StatusCode {
			case http.StatusAccepted:
				accepted.Add(1)
			case http.StatusConflict:
				soldOut.Add(1)
			default:
				errs <- fmt.Errorf("purchase %d: status %d", i, res.StatusCode)
			}
		}()
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if accepted.Load() != units || soldOut.Load() != shoppers-units {
		t.Fatalf("accepted %d, sold out %d; want %d and %d", accepted.Load(), soldOut.Load(), units, shoppers-units)
	}
	if spy.reserve.Load() == 0 || spy.limiter.Load() == 0 {
		t.Fatalf("pipelined scripts: reserve %d, limiter %d; want both through the auto-pipeliner",
			spy.reserve.Load(), spy.limiter.Load())
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
	left, err := stores.Redis.Client.HGet(ctx, a.Stock.SaleKey("pipe"), "available").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if orders != units || sold != units || left != 0 {
		t.Fatalf("orders %d, sold %d, available %d; want %d, %d, 0", orders, sold, left, units, units)
	}
}
