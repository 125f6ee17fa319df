package cart

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/orderhttp"
	"github.com/shop-oss/shop/internal/server"
)

// OneTripRoutes registers the checkout, whose checks ride with its
// reservation: ride is its route-level check (internal/onetrip's Ride).
func (s *Service) OneTripRoutes(r fiber.Router, ride, requireUser fiber.Handler) {
	r.Post("/cart/checkout", ride, requireUser, handler{s}.checkoutCart)
}

// Routes registers the cart routes; requireUser guards every one of them,
// and each acts on the caller's own cart only (there is no cart id to ask
// for another's).
func (s *Service) Routes(r fiber.Router, requireUser fiber.Handler) {
	h := handler{s}
	r.Get("/cart", requireUser, h.getCart)
	r.Delete("/cart", requireUser, h.clearCart)
	r.Post("/cart/items", requireUser, h.addItem)
	r.Put("/cart/items/:sku", requireUser, h.setItem)
	r.Delete("/cart/items/:sku", requireUser, h.removeItem)
}

// handler adapts HTTP to the Service's methods.
type handler struct{ svc *Service }

type addBody struct {
	SKU      *string `json:"sku"`
	Quantity *int64  `json:"quantity"`
}

type setBody struct {
	Quantity *int64 `json:"quantity"`
}

func (h handler) getCart(c *fiber.Ctx) error {
	cart, err := h.svc.Get(c.UserContext(), auth.MustUser(c).ID)
	if err != nil {
		return err
	}
	return c.JSON(cart)
}

// clearCart answers only its exact path. Fiber's routing ignores a
// trailing slash, and HTTP clients resolve dot-segments before sending, so
// DELETE /cart/items/.. (a removal of one line, to whoever typed it)
// arrives as DELETE /cart/: that must never empty the whole cart.
func (h handler) clearCart(c *fiber.Ctx) error {
	if strings.HasSuffix(c.Path(), "/") {
		return apperr.NewError(apperr.CodeNotFound, "no such resource; DELETE /api/v1/cart empties the cart")
	}
	if err := h.svc.Clear(c.UserContext(), auth.MustUser(c).ID); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// addItem: the sku is in the body, so a malformed one is a bad request
// (400 on "sku"); a well-formed one the catalog lacks is 404.
func (h handler) addItem(c *fiber.Ctx) error {
	var b addBody
	if err := server.Decode(c, &b); err != nil {
		return err
	}
	if err := b.check(); err != nil {
		return err
	}
	cart, err := h.svc.Add(c.UserContext(), auth.MustUser(c).ID, strings.Clone(*b.SKU), int(*b.Quantity))
	if err != nil {
		return err
	}
	return c.JSON(cart)
}

// check names every missing or malformed field at once.
func (b addBody) check() error {
	var bad []apperr.FieldError
	switch {
	case b.SKU == nil:
		bad = append(bad, apperr.FieldError{Field: "sku", Message: "is required"})
	case !inventory.ValidSKU(*b.SKU):
		bad = append(bad, apperr.FieldError{Field: "sku", Message: inventory.CodeRule})
	}
	if f := checkQuantity(b.Quantity, 1); f != nil {
		bad = append(bad, *f)
	}
	if len(bad) > 0 {
		return apperr.Invalid(bad...)
	}
	return nil
}

func checkQuantity(q *int64, least int) *apperr.FieldError {
	switch {
	case q == nil:
		return &apperr.FieldError{Field: "quantity", Message: "is required"}
	case *q < int64(least) || *q > MaxQuantity:
		f := quantityRange(least)
		return &f
	}
	return nil
}

// setItem: the sku is in the path, so a malformed one is a resource that
// does not exist (404), as everywhere else in the API.
func (h handler) setItem(c *fiber.Ctx) error {
	sku, err := pathSKU(c)
	if err != nil {
		return err
	}
	var b setBody
	if err := server.Decode(c, &b); err != nil {
		return err
	}
	if f := checkQuantity(b.Quantity, 0); f != nil {
		return apperr.Invalid(*f)
	}
	cart, err := h.svc.Set(c.UserContext(), auth.MustUser(c).ID, sku, int(*b.Quantity))
	if err != nil {
		return err
	}
	return c.JSON(cart)
}

func (h handler) removeItem(c *fiber.Ctx) error {
	sku, err := pathSKU(c)
	if err != nil {
		return err
	}
	cart, err := h.svc.Remove(c.UserContext(), auth.MustUser(c).ID, sku)
	if err != nil {
		return err
	}
	return c.JSON(cart)
}

func (h handler) checkoutCart(c *fiber.Ctx) error {
	key, err := orderhttp.IdempotencyKey(c)
	if err != nil {
		return err
	}
	placed, err := h.svc.Checkout(c.UserContext(), auth.MustUser(c).ID, key, onetrip.Of(c),
		order.ParsePasses(c.Get(order.HeaderQueuePass))...)
	if err != nil {
		return err
	}
	return c.Status(http.StatusAccepted).JSON(placed)
}

// pathSKU copies the path's sku (Fiber reuses its buffers) and answers 404
// for one that cannot exist.
func pathSKU(c *fiber.Ctx) (string, error) {
	sku := strings.Clone(c.Params("sku"))
	if !inventory.ValidSKU(sku) {
		return "", fmt.Errorf("cart: sku %q: %w", sku, ErrProductNotFound)
	}
	return sku, nil
}
