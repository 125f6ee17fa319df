package shop_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

// A purchase whose session check passed before the erasure, held on its
// way to Redis until the erasure has answered 204, takes nothing: the
// reservation (a single Redis, its check up front: a trailing slash the
// one-trip route does not match, or SHOP_REDIS_ONE_TRIP off) is refused,
// and a saga's order (a cluster) is cancelled by its own last step. It
// answers 401, and every unit is back, with no payment window to end it.
func TestErasureStopsAPurchaseOnItsWay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path string
		cluster    bool
		cfg        func(*config.Config)
	}{
		{"one trip, trailing slash", "/api/v1/products/race/purchase/", false, nil},
		{"checks up front", "/api/v1/products/race/purchase", false, func(c *config.Config) { c.RedisOneTrip = false }},
		{"cluster saga", "/api/v1/products/race/purchase", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := func(c *config.Config) {
				c.PaymentTTL = 0
				if tc.cfg != nil {
					tc.cfg(c)
				}
			}
			g := &scriptGate{hit: make(chan struct{}), release: make(chan struct{})}
			var a *shoptest.App
			if tc.cluster {
				c, rdb := testenv.StartOpenCluster(t, 3)
				rdb.AddHook(g)
				a = shoptest.OnCluster(t, c, rdb, cfg)
			} else {
				stores := shoptest.NewStores(t)
				hooked := redis.NewClient(stores.Redis.Client.Options())
				t.Cleanup(func() { _ = hooked.Close() })
				hooked.AddHook(g)
				a = shoptest.New(t, shoptest.Options{Stores: stores, Redis: hooked, Config: cfg})
			}
			_, admin := a.User(t, "admin@example.com", "admin")
			a.Sale(t, "race", 100, 5, 0)
			id, token := a.Shopper(t, "racer@example.com")
			g.arm("orders:pending:{" + id + "}")
			status := make(chan int, 1)
			go func() {
				req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(`{"quantity":3}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := a.Fiber.Test(req, -1)
				if err != nil {
					t.Error(err)
					status <- 0
					return
				}
				status <- resp.StatusCode
			}()
			select {
			case <-g.hit:
			case <-time.After(30 * time.Second):
				t.Fatal("the purchase never reached its script")
			}
			if r := a.Do(t, http.MethodDelete, "/api/v1/admin/users/"+id, admin, ""); r.Status != http.StatusNoContent {
				t.Fatalf("erase: %d %s", r.Status, r.Body)
			}
			close(g.release)
			if s := <-status; s != http.StatusUnauthorized {
				t.Errorf("the purchase on its way: %d, want 401", s)
			}
			ctx := context.Background()
			if live, _, err := a.Stock.Live(ctx, "race"); err != nil || live.Available != 5 {
				t.Errorf("available after the erasure: %d %v, want 5", live.Available, err)
			}
			if tc.cluster {
				return // the test's writer and audit read a single Redis
			}
			a.Drain(t)
			aud := audit.New(a.DB.Pool, a.Redis.Client, a.Stock, a.Config.KeyPrefix, a.Log)
			aud.LagBound = 0
			if rep, err := aud.Run(ctx); err != nil || !rep.OK {
				t.Fatalf("audit: %+v %v", rep, err)
			}
		})
	}
}

// scriptGate holds the first script call that names its match (here the
// buyer's pending index: a reservation, or a saga's finish) until
// released.
type scriptGate struct {
	mu      sync.Mutex
	match   string
	once    sync.Once
	hit     chan struct{}
	release chan struct{}
}

func (g *scriptGate) arm(match string) { g.mu.Lock(); g.match = match; g.mu.Unlock() }

func (g *scriptGate) hold(cmd redis.Cmder) {
	g.mu.Lock()
	match := g.match
	g.mu.Unlock()
	if n := cmd.Name(); match == "" || n != "evalsha" && n != "eval" {
		return
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.HasSuffix(s, match) {
			g.once.Do(func() { close(g.hit); <-g.release })
			return
		}
	}
}

func (g *scriptGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *scriptGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { g.hold(cmd); return next(ctx, cmd) }
}

func (g *scriptGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			g.hold(c)
		}
		return next(ctx, cmds)
	}
}
