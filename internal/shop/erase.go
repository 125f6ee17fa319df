package shop

import (
	"context"
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/order"
)

// EraseUser erases user id (any case, with or without its dashes) as
// docs/api.md says: every session revoked at once, then every unpaid order
// cancelled, its units back exactly once; paid orders stay, their buyer
// anonymised. It returns the canonical id and the orders it cancelled.
//
// Sessions go first, so no new request of theirs passes its check; one
// that passed just before cannot place an order after CancelUnpaid has
// marked the buyer erased, so the orders it reads are all there are. A
// user erased already answers
// auth.ErrUserErased (a 404) after the same steps, so that a repeat
// finishes what a failed erasure left. Errors: auth.ErrUserNotFound, or
// a 503.
func EraseUser(ctx context.Context, users *auth.Service, orders *order.Service, id string) (string, int, error) {
	uid, err := users.EraseUser(ctx, id)
	if err != nil && !errors.Is(err, auth.ErrUserErased) {
		return "", 0, err
	}
	n, cerr := orders.CancelUnpaid(ctx, uid)
	if cerr != nil {
		return uid, n, fmt.Errorf("erase user %s: %w", uid, cerr)
	}
	return uid, n, err
}

// erase is DELETE /api/v1/admin/users/{id}: 204, or 404 when no user
// has the id or they were erased already.
func (a *App) erase(c *fiber.Ctx) error {
	if _, _, err := EraseUser(c.UserContext(), a.Auth, a.Orders, c.Params("id")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
