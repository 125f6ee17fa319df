package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/outage"
)

// Bounds of an audit: over HTTP in all; its first PostgreSQL statement,
// as every PostgreSQL route's (a stalled server answers 503 in about 3 s);
// each of its larger reads of orders.
const (
	httpTimeout   = 20 * time.Second
	dbTimeout     = 3 * time.Second
	dbReadTimeout = 10 * time.Second
)

// Routes registers GET /admin/audit behind admin.
func (a *Auditor) Routes(r fiber.Router, admin fiber.Handler) {
	h := handler{a}
	r.Get("/admin/audit", admin, h.audit)
}

type handler struct{ a *Auditor }

// audit answers 200 whether or not the invariants hold: "ok" says which.
func (h handler) audit(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), httpTimeout)
	defer cancel()
	rep, err := h.a.Run(ctx)
	if err != nil {
		if outage.Is(err) {
			return fmt.Errorf("%w: %w", apperr.Unavailable("the audit needs Redis and PostgreSQL"), err)
		}
		return err
	}
	return c.JSON(rep)
}
