package shop

import (
	"context"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/ratelimit"
)

// One script per purchase on a single Redis (issue 16, BENCHMARKS.md).
//
// A purchase used to pay two round trips to Redis: the rate limiter's
// script, which also carries the session check (auth's limiter
// companion), and the reserve script; a checkout three, with the cart
// read between them. On one Redis server the three scripts run in one
// call instead: the limiter defers the purchase's and the checkout's
// check (ratelimit.Deferred), and the order service's reservation runs
// through the request's Gate, which runs the limiter's window, the
// session check and reserve.lua in that order in one EVALSHA (the
// combined script is ratelimit's followedLua, built once from each
// owner's own Lua: the window's, auth's check.lua and its Admit, and
// order.ReserveLua; none is copied or changed here). Every answer stays
// what it was: a limited request gets 429 and reserves nothing, a revoked
// session 401 and reserves nothing, each request is counted once, and a
// request that fails before reserving (a bad body, a bad token) is
// answered after the check runs alone, with the check's refusal first.
//
// Where the keys cannot share one call nothing is deferred and the steps
// stay separate: on a cluster (the limiter's, the session's and the
// sale's keys are on different slots; ratelimit declines the companion
// there) and with the limiter off (no check to combine), and
// SHOP_REDIS_ONE_TRIP=false keeps them too (for A/B measurement).

// oneTripRoutes is the limiter's Defer for cfg: the purchase route's, or
// nil when SHOP_REDIS_ONE_TRIP is off.
func oneTripRoutes(cfg *config.Config) func(*fiber.Ctx) bool {
	if !cfg.RedisOneTrip {
		return nil
	}
	return deferPurchase
}

// deferPurchase names the requests whose check is deferred: the purchase
// route's (order.Service.Routes) and the checkout's (cart.Service.Routes),
// under server's /api/v1, which change nothing before their reservation
// (a checkout reads the cart first, and answers a replay only after the
// check: order.Service.Replay). A path it does not recognise (another
// letter case, a trailing slash) is checked up front as before.
func deferPurchase(c *fiber.Ctx) bool {
	if c.Method() != fiber.MethodPost {
		return false
	}
	if c.Path() == "/api/v1/cart/checkout" {
		return true
	}
	sku, ok := strings.CutPrefix(c.Path(), "/api/v1/products/")
	if !ok {
		return false
	}
	sku, ok = strings.CutSuffix(sku, "/purchase")
	return ok && sku != "" && !strings.Contains(sku, "/")
}

// reserveGate is the order service's Gate for a request whose check was
// deferred, nil for any other.
func reserveGate(ctx context.Context) order.Gate {
	if d := ratelimit.DeferredFrom(ctx); d != nil {
		return deferredGate{d}
	}
	return nil
}

// deferredGate runs the reservation in the limiter's deferred check.
type deferredGate struct{ d *ratelimit.Deferred }

func (g deferredGate) Reserve(ctx context.Context, keys []string, args []any) (any, bool, error) {
	reply, ran, err := g.d.Run(ctx, keys, args)
	return reply, ran, g.refusal(err)
}

func (g deferredGate) Settle(context.Context) error { return g.refusal(g.d.Settle()) }

// refusal marks the check's refusal as the order service's Refusal; a
// Redis error stays the placement's own.
func (g deferredGate) refusal(err error) error {
	if r := g.d.Refusal(); err != nil && r != nil && errors.Is(err, r) {
		return order.Refusal(r)
	}
	return err
}
