package shop

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/server"
)

// customer is a user as the admin list shows them: the account (auth's)
// with the number of their orders (order's).
type customer struct {
	auth.Listed
	Orders int64 `json:"orders"`
}

// listUsers is GET /api/v1/admin/users?email=&limit=&cursor=.
func (a *App) listUsers(c *fiber.Ctx) error {
	email := strings.Clone(c.Query("email"))
	q, bad := server.PageQuery(c, auth.ListDefaultLimit, auth.ListMaxLimit)
	if bad != nil { // every bad parameter in one answer
		return apperr.Invalid(append([]apperr.FieldError{*bad}, auth.CheckList(email, q.Cursor)...)...)
	}
	page, err := a.Auth.ListUsers(c.UserContext(), email, q.Limit, q.Cursor)
	if err != nil {
		return err
	}
	ids := make([]string, len(page.Items))
	for i, u := range page.Items {
		ids[i] = u.ID
	}
	counts, err := a.Orders.CountByUser(c.UserContext(), ids)
	if err != nil {
		return err
	}
	items := make([]customer, len(page.Items))
	for i, u := range page.Items {
		items[i] = customer{u, counts[u.ID]}
	}
	return c.JSON(fiber.Map{"items": items, "next_cursor": page.NextCursor})
}
