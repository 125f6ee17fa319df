package order

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/server"
)

// AdminRoutes registers the admin order routes on r behind requireAdmin.
func (s *Service) AdminRoutes(r fiber.Router, requireAdmin fiber.Handler) {
	r.Get("/admin/orders", requireAdmin, s.adminList)
}

// adminList is GET /api/v1/admin/orders?status=&sku=&email=&limit=&cursor=.
func (s *Service) adminList(c *fiber.Ctx) error {
	f := AdminFilter{Status: strings.Clone(c.Query("status")), SKU: strings.Clone(c.Query("sku")),
		Email: strings.Clone(c.Query("email"))}
	q, bad := server.PageQuery(c, AdminDefaultLimit, AdminMaxLimit)
	if bad != nil { // every bad parameter in one answer
		return apperr.Invalid(append([]apperr.FieldError{*bad}, CheckAdminList(f, q.Cursor)...)...)
	}
	p, err := s.AdminList(c.UserContext(), f, q.Limit, q.Cursor)
	if err != nil {
		return err
	}
	return c.JSON(p)
}
