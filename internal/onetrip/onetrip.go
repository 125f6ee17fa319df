// Package onetrip owns the scripts that run a request's checks and its
// first Redis step in one call on a single Redis: a purchase's rate-limit
// window, session check and reservation; an anonymous product read's
// window and read. trip.lua is the whole script, read top to bottom; the
// limiter runs it for the routes Deferrals names, and the route hands its
// check down as a parameter (order.PlaceOptions.Checks, inventory's
// GetWith).
//
// The reasoning is in docs/design/onetrip.md.
package onetrip

import (
	_ "embed"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/room"
)

//go:embed trip.lua
var tripLua string

// Purchase is a purchase's one trip: the window, the session check, then
// the reservation (order's reserve.lua).
var Purchase = assemble(order.ReserveLua())

// ProductRead is a product read's: the window, then the cached document
// and the live stock (inventory's ProductReadLua). Only anonymous reads
// take it, so its session check never runs (ProductReadRoute says why).
var ProductRead = assemble(inventory.ProductReadLua())

// Queue is a waiting room join's or ticket read's: the window, the
// session check, then join.lua (room's).
var Queue = assemble(room.JoinLua())

// assemble fills trip.lua's slots with each part's own script; a part's
// shebang line is dropped, since only the first line of the whole may be
// one.
func assemble(step string) string {
	return strings.NewReplacer(
		"{{window}}", dropShebang(ratelimit.WindowLua()),
		"{{session}}", dropShebang(auth.SessionCheckLua()),
		"{{admits}}", auth.AdmitLua(),
		"{{step}}", dropShebang(step),
	).Replace(tripLua)
}

func dropShebang(lua string) string {
	if !strings.HasPrefix(lua, "#!") {
		return lua
	}
	_, rest, _ := strings.Cut(lua, "\n")
	return rest
}

// Deferrals are the limiter's deferred routes: purchases and checkouts,
// and anonymous product reads when reads is true (when the document and
// the stock live in the limiter's Redis and not in memory).
func Deferrals(reads bool) []ratelimit.Deferral {
	d := []ratelimit.Deferral{
		{Name: order.OneTrip, Match: PurchaseRoute, Script: Purchase},
		{Name: room.OneTrip, Match: QueueRoute, Script: Queue},
	}
	if reads {
		d = append(d, ratelimit.Deferral{Name: inventory.OneTripRead, Match: ProductReadRoute, Script: ProductRead})
	}
	return d
}

// PurchaseRoute names the requests whose check rides with their
// reservation: a purchase (order.Service.Routes) or a checkout
// (cart.Service.Routes), under /api/v1; neither changes anything before
// its reservation. A path it does not recognise (another letter case, a
// trailing slash) is checked up front as before.
func PurchaseRoute(c *fiber.Ctx) bool {
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

// QueueRoute names the requests whose check rides with join.lua: a join
// (POST) or a ticket read (GET) of /api/v1/products/{sku}/queue
// (room.Service.Routes); neither changes anything before the script.
func QueueRoute(c *fiber.Ctx) bool {
	if m := c.Method(); m != fiber.MethodPost && m != fiber.MethodGet {
		return false
	}
	sku, ok := strings.CutPrefix(c.Path(), "/api/v1/products/")
	if !ok {
		return false
	}
	sku, ok = strings.CutSuffix(sku, "/queue")
	return ok && sku != "" && !strings.Contains(sku, "/")
}

// ProductReadRoute names the product reads whose check rides with the
// read: GET /api/v1/products/{sku} without an Authorization header. A
// read bearing a token is checked up front: auth's OptionalUser needs the
// session's answer before the route, and a revoked session must still
// read, anonymously.
func ProductReadRoute(c *fiber.Ctx) bool {
	if c.Method() != fiber.MethodGet || len(c.Request().Header.Peek(fiber.HeaderAuthorization)) != 0 {
		return false
	}
	sku, ok := strings.CutPrefix(c.Path(), "/api/v1/products/")
	return ok && sku != "" && !strings.Contains(sku, "/")
}
