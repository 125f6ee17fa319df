package visitor

import (
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/inventory"
)

// errNoProduct: a report on a product the catalog does not have.
var errNoProduct = apperr.NewError(apperr.CodeNotFound, "product not found")

// Routes registers, on r (the /api/v1 router), the counting of product
// reads (CountRoutes) and the admin reports behind requireAdmin
// (ReportRoutes; a nil requireAdmin registers none).
func (s *Service) Routes(r fiber.Router, optionalUser, requireAdmin fiber.Handler) {
	s.CountRoutes(r, optionalUser)
	if requireAdmin != nil {
		s.ReportRoutes(r, requireAdmin)
	}
}

// CountRoutes registers the counting of product reads. Mount it before
// the catalog's read: its GET /products/:sku handler runs the catalog's
// (c.Next) and counts the read when that answered 200, by the user the
// read left in the request's context, else by IP. optionalUser, when set,
// puts the user of a valid token there first (auth.Service.OptionalUser);
// the shop's catalog read names its reader itself.
func (s *Service) CountRoutes(r fiber.Router, optionalUser fiber.Handler) {
	if optionalUser == nil {
		optionalUser = func(c *fiber.Ctx) error { return c.Next() }
	}
	r.Get("/products/:sku", optionalUser, handler{s}.count)
}

// ReportRoutes registers the admin reports behind requireAdmin.
func (s *Service) ReportRoutes(r fiber.Router, requireAdmin fiber.Handler) {
	h := handler{s}
	r.Get("/admin/products/:sku/visitors", requireAdmin, h.product)
	r.Get("/admin/visitors", requireAdmin, h.site)
}

type handler struct{ s *Service }

// count runs the read, then counts it if it answered 200.
func (h handler) count(c *fiber.Ctx) error {
	err := c.Next()
	if err == nil && c.Method() == fiber.MethodGet && c.Response().StatusCode() == fiber.StatusOK {
		h.s.Count(c.Params("sku"), h.visitor(c))
	}
	return err
}

// visitor names who read: the user of a valid token, else the client IP.
func (h handler) visitor(c *fiber.Ctx) string {
	if u, ok := auth.UserFromContext(c.UserContext()); ok {
		return "user:" + u.ID
	}
	if h.s.o.ClientIP != nil {
		return "ip:" + h.s.o.ClientIP(c)
	}
	return "ip:" + c.IP()
}

func (h handler) product(c *fiber.Ctx) error {
	sku := strings.Clone(c.Params("sku"))
	from, to, err := dateRange(c, h.s.now())
	if err != nil {
		return err
	}
	if !inventory.ValidSKU(sku) {
		return errNoProduct
	}
	if h.s.o.Exists != nil {
		ok, err := h.s.o.Exists(c.UserContext(), sku)
		if err != nil {
			return err
		}
		if !ok {
			return errNoProduct
		}
	}
	r, err := h.s.Report(c.UserContext(), sku, from, to)
	if err != nil {
		return err
	}
	return c.JSON(r)
}

func (h handler) site(c *fiber.Ctx) error {
	from, to, err := dateRange(c, h.s.now())
	if err != nil {
		return err
	}
	r, err := h.s.Report(c.UserContext(), "", from, to)
	if err != nil {
		return err
	}
	return c.JSON(r)
}

// dateRange reads ?from= and ?to= (YYYY-MM-DD, both default today, from
// not after to, at most MaxDays days), reporting every bad one at once.
func dateRange(c *fiber.Ctx, now time.Time) (from, to time.Time, err error) {
	var bad []apperr.FieldError
	from, okFrom := date(c, "from", now, &bad)
	to, okTo := date(c, "to", now, &bad)
	if okFrom && okTo {
		switch days := int(to.Sub(from).Hours()/24) + 1; {
		case days < 1:
			bad = append(bad, apperr.FieldError{Field: "to", Message: "must not be before from"})
		case days > MaxDays:
			bad = append(bad, apperr.FieldError{Field: "to", Message: fmt.Sprintf("the range covers %d days; at most %d", days, MaxDays)})
		}
	}
	if len(bad) > 0 {
		return from, to, apperr.Invalid(bad...)
	}
	return from, to, nil
}

func date(c *fiber.Ctx, name string, now time.Time, bad *[]apperr.FieldError) (time.Time, bool) {
	raw := c.Query(name)
	if raw == "" {
		return dayOf(now), true
	}
	t, err := time.Parse(dateLayout, raw)
	if err != nil || t.Format(dateLayout) != raw {
		*bad = append(*bad, apperr.FieldError{Field: name, Message: "must be a date YYYY-MM-DD"})
		return t, false
	}
	return t, true
}
