package shop

import (
	"context"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/ratelimit"
)

// One script per purchase, and per product read, on a single Redis (issue 16,
// BENCHMARKS.md).
// More in docs/design/shop.md ("onetrip.go").

// Names of the limiter's deferrals, which tell each route's code whether
// the request's deferred check carries its follower.
const (
	reserveDeferral     = "reserve"
	productReadDeferral = "product-read"
)

// oneTripRoutes is the limiter's Defer for cfg and st: the purchase
// route's, and the product read's when it can make one trip (see
// productReadsInOneTrip); nil when SHOP_REDIS_ONE_TRIP is off.
func oneTripRoutes(cfg *config.Config, st Stores) []ratelimit.Deferral {
	if !cfg.RedisOneTrip {
		return nil
	}
	d := []ratelimit.Deferral{{Name: reserveDeferral, Match: deferPurchase, Follower: order.ReserveLua()}}
	if productReadsInOneTrip(cfg, st) {
		d = append(d, ratelimit.Deferral{Name: productReadDeferral, Match: deferProductRead,
			Follower: inventory.ProductReadLua()})
	}
	return d
}

// productReadsInOneTrip says whether a product read's document and stock
// come from the Redis the limiter runs on, in a script call: not when the
// cache has a Redis of its own (SHOP_CACHE_REDIS_URL), nor when they come
// from memory (SHOP_NEAR_CACHE_TTL > 0: a near hit needs no call).
func productReadsInOneTrip(cfg *config.Config, st Stores) bool {
	return st.Cache == nil && cfg.NearCacheTTL <= 0
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

// deferProductRead names the product reads whose check is deferred:
// GET /api/v1/products/{sku} (inventory.Catalog.Routes, under server's
// /api/v1, behind visitor's counting) without an Authorization header. A
// read bearing a token is checked up front, with its session check riding
// in the limiter's call, as before: auth's OptionalUser needs the
// session's answer before the route runs, and a revoked session must
// still read (anonymously), which a deferred follower refused by the
// session check could not.
func deferProductRead(c *fiber.Ctx) bool {
	if c.Method() != fiber.MethodGet || len(c.Request().Header.Peek(fiber.HeaderAuthorization)) != 0 {
		return false
	}
	sku, ok := strings.CutPrefix(c.Path(), "/api/v1/products/")
	return ok && sku != "" && !strings.Contains(sku, "/")
}

// reserveGate is the order service's Gate for a request whose check was
// deferred with the reservation, nil for any other.
func reserveGate(ctx context.Context) order.Gate {
	if d := ratelimit.DeferredFrom(ctx, reserveDeferral); d != nil {
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

// readGate is the catalog's ReadGate for a product read whose check was
// deferred with the product read, nil for any other (a purchase's check
// carries the reservation, even when its route reads the catalog).
func readGate(ctx context.Context) inventory.ReadGate {
	if d := ratelimit.DeferredFrom(ctx, productReadDeferral); d != nil {
		return deferredRead{d}
	}
	return nil
}

// deferredRead runs the product read in the limiter's deferred check.
type deferredRead struct{ d *ratelimit.Deferred }

// Read answers the check's refusal (429) as it is; after a Redis error,
// which the limiter has counted and logged and lets a read through, the
// catalog reads on its own, as it did after the limiter's own call
// failed.
func (g deferredRead) Read(ctx context.Context, keys []string, args []any) (any, bool, error) {
	reply, ran, err := g.d.Run(ctx, keys, args)
	if err != nil && g.d.Refusal() == nil {
		return nil, false, nil
	}
	return reply, ran, err
}
