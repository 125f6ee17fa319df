package draw

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/orderhttp"
	"github.com/shop-oss/shop/internal/server"
)

// Routes registers the draw routes on r (the /api/v1 router): the public
// answer, the shopper's entry behind requireUser, the admin's list and
// close behind requireAdmin.
func (s *Service) Routes(r fiber.Router, requireUser, requireAdmin fiber.Handler) {
	h := handler{s}
	r.Get("/products/:sku/draw", onSKU(h.get))
	r.Post("/products/:sku/draw/entries", requireUser, h.enter)
	r.Get("/products/:sku/draw/entries/me", requireUser, onSKU(h.mine))
	r.Delete("/products/:sku/draw/entries/me", requireUser, onSKU(h.withdraw))
	r.Get("/admin/products/:sku/draw/entries", requireAdmin, h.entries)
	r.Post("/admin/products/:sku/draw/close", requireAdmin, onSKU(h.close))
}

type handler struct{ s *Service }

// onSKU makes a route whose whole work is one call on the path's SKU: the
// SKU is checked first, so do never sees one that cannot exist, and what do
// returns is the 200 body.
func onSKU[T any](do func(c *fiber.Ctx, sku string) (T, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		sku, err := inventory.PathSKU(c)
		if err != nil {
			return err
		}
		v, err := do(c, sku)
		if err != nil {
			return err
		}
		return c.JSON(v)
	}
}

type enterBody struct {
	Quantity     *int64  `json:"quantity"`
	PaymentToken *string `json:"payment_token"`
}

// maxQuantity bounds an entry's quantity before the draw's limit is read.
const maxQuantity = 1_000_000

func (b enterBody) validate() (Enter, error) {
	var errs []apperr.FieldError
	in := Enter{Quantity: 1}
	if b.Quantity != nil {
		if *b.Quantity < 1 || *b.Quantity > maxQuantity {
			errs = append(errs, apperr.Field("quantity", "must be an integer from 1 to the draw's limit"))
		} else {
			in.Quantity = int(*b.Quantity)
		}
	}
	switch {
	case b.PaymentToken == nil:
		errs = append(errs, apperr.Field("payment_token", "is required"))
	case len(*b.PaymentToken) == 0 || len(*b.PaymentToken) > 255:
		errs = append(errs, apperr.Field("payment_token", "must be 1 to 255 characters"))
	default:
		in.Token = *b.PaymentToken
	}
	if len(errs) > 0 {
		return Enter{}, apperr.Invalid(errs...)
	}
	return in, nil
}

func (h handler) enter(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	var b enterBody
	if err := server.Decode(c, &b); err != nil {
		return err
	}
	in, err := b.validate()
	if err != nil {
		return err
	}
	if in.IdemKey, err = orderhttp.IdempotencyKey(c); err != nil {
		return err
	}
	e, err := h.s.Enter(c.UserContext(), auth.MustUser(c).ID, sku, in)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	switch {
	case e.Replayed:
		status = http.StatusOK
	case e.State == StateAuthorizing:
		status = http.StatusAccepted
	}
	return c.Status(status).JSON(e.Entry)
}

func (h handler) entries(c *fiber.Ctx) error {
	sku, err := inventory.PathSKU(c)
	if err != nil {
		return err
	}
	q, bad := server.PageQuery(c, 100, 1000)
	if bad != nil {
		return apperr.Invalid(*bad)
	}
	page, err := h.s.Entries(c.UserContext(), sku, q.Limit, q.Cursor)
	if err != nil {
		return err
	}
	return c.JSON(page)
}

// The routes below are one call on the path's SKU, answered as JSON; the
// shopper's come from the session, which requireUser has checked.
func (h handler) get(c *fiber.Ctx, sku string) (Public, error) {
	return h.s.Get(c.UserContext(), sku)
}

func (h handler) mine(c *fiber.Ctx, sku string) (Entry, error) {
	return h.s.Mine(c.UserContext(), auth.MustUser(c).ID, sku)
}

func (h handler) withdraw(c *fiber.Ctx, sku string) (Entry, error) {
	return h.s.Withdraw(c.UserContext(), auth.MustUser(c).ID, sku)
}

func (h handler) close(c *fiber.Ctx, sku string) (Public, error) {
	return h.s.Close(c.UserContext(), sku)
}
