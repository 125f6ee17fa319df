package orderhttp

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/server"
)

// AdminRoutes registers the admin order routes; requireAdmin guards them.
func AdminRoutes(r fiber.Router, s *order.Service, requireAdmin fiber.Handler) {
	r.Get("/admin/orders", requireAdmin, handler{s}.adminList)
	r.Post("/admin/orders/:id/refund", requireAdmin, handler{s}.refund)
}

// refund is POST /api/v1/admin/orders/{id}/refund. An Idempotency-Key is
// accepted (and checked) but changes nothing: a refund is idempotent per
// order already, and a refunded order answers the same.
func (h handler) refund(c *fiber.Ctx) error {
	if _, err := IdempotencyKey(c); err != nil {
		return err
	}
	o, err := h.svc.Refund(c.UserContext(), strings.Clone(c.Params("id")))
	if err != nil {
		return err
	}
	return c.JSON(o)
}

// adminList is GET /api/v1/admin/orders?status=&sku=&email=&limit=&cursor=.
func (h handler) adminList(c *fiber.Ctx) error {
	f := order.AdminFilter{Status: strings.Clone(c.Query("status")), SKU: strings.Clone(c.Query("sku")),
		Email: strings.Clone(c.Query("email"))}
	q, bad := server.PageQuery(c, order.AdminDefaultLimit, order.AdminMaxLimit)
	if bad != nil { // every bad parameter in one answer
		return apperr.Invalid(append([]apperr.FieldError{*bad}, order.CheckAdminList(f, q.Cursor)...)...)
	}
	p, err := h.svc.AdminList(c.UserContext(), f, q.Limit, q.Cursor)
	if err != nil {
		return err
	}
	return c.JSON(p)
}
