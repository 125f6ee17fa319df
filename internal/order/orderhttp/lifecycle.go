package orderhttp

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/server"
)

type payBody struct {
	PaymentToken *string `json:"payment_token"`
}

// maxTokenLen bounds a payment token (providers' are far shorter).
const maxTokenLen = 255

// pay: POST /orders/{id}/pay. An Idempotency-Key is accepted (and
// checked) but changes nothing: paying is idempotent per order and token
// already (the provider's charge key), and a paid order answers the same.
func (h handler) pay(c *fiber.Ctx) error {
	user, id := auth.MustUser(c).ID, strings.Clone(c.Params("id"))
	var b payBody
	if err := server.Decode(c, &b); err != nil {
		return h.notFoundFirst(c, user, id, err)
	}
	if b.PaymentToken == nil || *b.PaymentToken == "" || len(*b.PaymentToken) > maxTokenLen {
		return h.notFoundFirst(c, user, id,
			apperr.Invalid(apperr.FieldError{Field: "payment_token", Message: "required, 1 to 255 characters"}))
	}
	if _, err := IdempotencyKey(c); err != nil {
		return err
	}
	o, err := h.svc.Pay(c.UserContext(), user, id, *b.PaymentToken)
	if err != nil {
		return err
	}
	if o.Status == order.StatusConfirmed {
		// The provider needs more (the shopper's 3-D Secure, a slow
		// method): its payment says what, and its webhook finishes it.
		return c.Status(http.StatusAccepted).JSON(o)
	}
	return c.JSON(o)
}

// cancel: POST /orders/{id}/cancel.
func (h handler) cancel(c *fiber.Ctx) error {
	o, err := h.svc.Cancel(c.UserContext(), auth.MustUser(c).ID, strings.Clone(c.Params("id")))
	if err != nil {
		return err
	}
	return c.JSON(o)
}

// notFoundFirst answers a bad request about an order that is not the
// caller's (or does not exist) with 404, as every other answer about it:
// a 400 would tell another user's order ids from unknown ones.
func (h handler) notFoundFirst(c *fiber.Ctx, user, id string, bad error) error {
	if _, err := h.svc.Get(c.UserContext(), user, id); errors.Is(err, order.ErrNotFound) {
		return order.ErrNotFound
	}
	return bad
}
