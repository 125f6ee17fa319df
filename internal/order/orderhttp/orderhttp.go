// Package orderhttp serves the order routes (docs/api.md, Orders and
// the purchase): it reads and checks each request, calls the order
// Service, and writes its answer; the Service's errors are problem+json
// through internal/server. It owns the Idempotency-Key header's rule,
// which the cart's checkout shares.
package orderhttp

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/server"
)

// HeaderIdempotencyKey makes a purchase or checkout safe to retry.
const HeaderIdempotencyKey = "Idempotency-Key"

// OneTripRoutes registers the purchase, whose checks ride with its
// reservation: ride is its route-level check (internal/onetrip's Ride).
func OneTripRoutes(r fiber.Router, s *order.Service, ride, requireUser fiber.Handler) {
	r.Post("/products/:sku/purchase", ride, requireUser, handler{s}.purchase)
}

// Routes registers the order routes; requireUser guards them.
func Routes(r fiber.Router, s *order.Service, requireUser fiber.Handler) {
	h := handler{s}
	r.Get("/orders/:id", requireUser, h.getOrder)
	r.Get("/orders", requireUser, h.listOrders)
	r.Post("/orders/:id/pay", requireUser, h.pay)
	r.Post("/orders/:id/cancel", requireUser, h.cancel)
}

// handler adapts HTTP to the Service's methods.
type handler struct{ svc *order.Service }

type purchaseBody struct {
	Quantity *int64 `json:"quantity"`
}

func (h handler) purchase(c *fiber.Ctx) error {
	user := auth.MustUser(c)
	sku := strings.Clone(c.Params("sku"))
	if !inventory.ValidSKU(sku) {
		return order.ErrProductNotFound
	}
	var b purchaseBody
	if err := server.DecodeOptional(c, &b); err != nil {
		return err
	}
	qty := int64(1)
	if b.Quantity != nil {
		qty = *b.Quantity
	}
	if qty < 1 || qty > order.MaxQuantity {
		return apperr.Invalid(apperr.FieldError{Field: "quantity", Message: "must be an integer from 1 to " + strconv.Itoa(order.MaxQuantity)})
	}
	key, err := IdempotencyKey(c)
	if err != nil {
		return err
	}
	placed, err := h.svc.Place(c.UserContext(), user.ID, []order.Line{{SKU: sku, Quantity: int(qty)}},
		order.PlaceOptions{IdemKey: key, Checks: onetrip.Of(c), Passes: order.ParsePasses(c.Get(order.HeaderQueuePass))})
	if err != nil {
		return err
	}
	return c.Status(http.StatusAccepted).JSON(placed)
}

// IdempotencyKey reads the optional Idempotency-Key header: 1 to 255
// printable ASCII characters.
func IdempotencyKey(c *fiber.Ctx) (string, error) {
	k := c.Get(HeaderIdempotencyKey)
	if k == "" {
		return "", nil
	}
	ok := len(k) <= 255
	for i := 0; ok && i < len(k); i++ {
		ok = k[i] > ' ' && k[i] <= '~'
	}
	if !ok {
		return "", apperr.Invalid(apperr.FieldError{Field: HeaderIdempotencyKey, Message: "must be 1 to 255 printable ASCII characters"})
	}
	return strings.Clone(k), nil
}

func (h handler) getOrder(c *fiber.Ctx) error {
	o, err := h.svc.Get(c.UserContext(), auth.MustUser(c).ID, c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(o)
}

func (h handler) listOrders(c *fiber.Ctx) error {
	q, bad := server.PageQuery(c, 20, 100)
	if bad != nil {
		return apperr.Invalid(*bad)
	}
	page, err := h.svc.List(c.UserContext(), auth.MustUser(c).ID, q.Limit, q.Cursor)
	if err != nil {
		return err
	}
	return c.JSON(page)
}
