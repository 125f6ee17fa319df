package inventory

import (
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/api"
)

// Bounds of a seeding request.
const (
	maxSeedQuantity = 10_000_000
	maxUserLimit    = 1_000_000
)

// Routes registers the admin stock routes; requireAdmin guards them.
func (s *Sales) Routes(r fiber.Router, requireAdmin fiber.Handler) {
	h := handler{sales: s}
	r.Put("/admin/products/:sku/stock", requireAdmin, h.putStock)
	r.Get("/admin/products/:sku/stock", requireAdmin, h.getStock)
}

type seedBody struct {
	Quantity     *int64  `json:"quantity"`
	PerUserLimit *int64  `json:"per_user_limit"`
	StartsAt     *string `json:"starts_at"`
	EndsAt       *string `json:"ends_at"`
}

func (h handler) putStock(c *fiber.Ctx) error {
	sku, err := pathSKU(c)
	if err != nil {
		return err
	}
	var b seedBody
	if err := api.Decode(c, &b); err != nil {
		return err
	}
	seed, err := b.validate(time.Now())
	if err != nil {
		return err
	}
	rep, err := h.sales.Open(c.UserContext(), sku, seed)
	if err != nil {
		return err
	}
	return c.Status(http.StatusOK).JSON(rep)
}

func (h handler) getStock(c *fiber.Ctx) error {
	sku, err := pathSKU(c)
	if err != nil {
		return err
	}
	rep, err := h.sales.Report(c.UserContext(), sku)
	if err != nil {
		return err
	}
	return c.JSON(rep)
}

// validate checks every field and reports all that are wrong at once.
func (b seedBody) validate(now time.Time) (Seed, error) {
	var errs []api.FieldError
	bad := func(field, msg string) { errs = append(errs, api.FieldError{Field: field, Message: msg}) }
	seed := Seed{PerUserLimit: 1}
	switch {
	case b.Quantity == nil:
		bad("quantity", "is required")
	case *b.Quantity < 0 || *b.Quantity > maxSeedQuantity:
		bad("quantity", "must be an integer from 0 to 10000000")
	default:
		seed.Quantity = int(*b.Quantity)
	}
	if b.PerUserLimit != nil {
		if *b.PerUserLimit < 0 || *b.PerUserLimit > maxUserLimit {
			bad("per_user_limit", "must be an integer from 0 (unlimited) to 1000000")
		} else {
			seed.PerUserLimit = int(*b.PerUserLimit)
		}
	}
	seed.StartsAt = parseTime(b.StartsAt, "starts_at", bad)
	seed.EndsAt = parseTime(b.EndsAt, "ends_at", bad)
	if !seed.EndsAt.IsZero() {
		if !seed.StartsAt.IsZero() && !seed.EndsAt.After(seed.StartsAt) {
			bad("ends_at", "must be after starts_at")
		} else if !seed.EndsAt.After(now) {
			bad("ends_at", "must be in the future")
		}
	}
	if len(errs) > 0 {
		return Seed{}, api.Invalid(errs...)
	}
	return seed, nil
}

func parseTime(s *string, field string, bad func(string, string)) time.Time {
	if s == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		bad(field, "must be an RFC 3339 time, like 2026-12-01T10:00:00Z")
		return time.Time{}
	}
	return t.UTC()
}

// pathSKU returns the {sku} path parameter, copied (Fiber reuses its
// buffers); a SKU that cannot exist is answered 404 like a missing one.
func pathSKU(c *fiber.Ctx) (string, error) {
	sku := param(c, "sku")
	if !ValidSKU(sku) {
		return "", ErrProductNotFound
	}
	return sku, nil
}
