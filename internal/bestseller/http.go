package bestseller

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/server"
)

// Routes registers the public best-seller reads on r (the /api/v1 router).
func (s *Service) Routes(r fiber.Router) {
	h := handler{s}
	r.Get("/best-sellers", h.top)
	r.Get("/best-sellers/:sku", h.position)
}

// handler adapts HTTP to the Service's reads.
type handler struct{ s *Service }

func (h handler) top(c *fiber.Ctx) error {
	var bad []apperr.FieldError
	p := period(c, &bad)
	limit := server.QueryInt(c, "limit", DefaultLimit, 1, MaxLimit, &bad)
	if len(bad) > 0 {
		return apperr.Invalid(bad...)
	}
	b, err := h.s.Top(c.UserContext(), p, limit)
	if err != nil {
		return err
	}
	return c.JSON(b)
}

func (h handler) position(c *fiber.Ctx) error {
	var bad []apperr.FieldError
	p := period(c, &bad)
	around := server.QueryInt(c, "around", DefaultAround, 0, MaxAround, &bad)
	if len(bad) > 0 {
		return apperr.Invalid(bad...)
	}
	pos, err := h.s.Position(c.UserContext(), p, strings.Clone(c.Params("sku")), around)
	if err != nil {
		return err
	}
	return c.JSON(pos)
}

// period reads ?period=, noting a bad one in bad.
func period(c *fiber.Ctx, bad *[]apperr.FieldError) Period {
	p, ok := ParsePeriod(c.Query("period"))
	if !ok {
		*bad = append(*bad, apperr.FieldError{Field: "period", Message: "must be one of day, week, month, all"})
	}
	return p
}
