package order

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
)

// Bounds of a page of the admin order list.
const (
	AdminDefaultLimit = 50
	AdminMaxLimit     = 500
)

// adminListSQL is listOrdersSQL over every buyer, with the buyer, and the
// filters: $3 a status, $4 a sku among the lines, $5 the buyer's email
// in any case; an empty one matches any.
const adminListSQL = `
SELECT o.id, o.total_cents, o.created_at, o.expires_at, coalesce(t.status, 'confirmed'),
       CASE WHEN t.status IN ('paid', 'refunded') THEN t.at END, coalesce(t.payment_ref, ''),
       coalesce(json_agg(json_build_object('sku', i.sku, 'quantity', i.quantity, 'price_cents', i.price_cents)
                ORDER BY i.sku) FILTER (WHERE i.sku IS NOT NULL), '[]'),
       o.user_id::text, u.email
FROM orders o JOIN users u ON u.id = o.user_id
LEFT JOIN order_items i ON i.order_id = o.id
LEFT JOIN order_transitions t ON t.order_id = o.id
WHERE (o.created_at, o.id) < ($1, $2)
  AND ($3 = '' OR coalesce(t.status, 'confirmed') = $3)
  AND ($4 = '' OR EXISTS (SELECT 1 FROM order_items s WHERE s.order_id = o.id AND s.sku = $4))
  AND ($5 = '' OR lower(u.email) = lower($5))
GROUP BY o.id, t.order_id, u.id
ORDER BY o.created_at DESC, o.id DESC
LIMIT $6`

// AdminOrder is an order as the admin list shows it: with its buyer.
type AdminOrder struct {
	Order
	UserID string `json:"user_id"`
	Email  string `json:"email"`
}

// AdminPage is a page of the admin order list.
type AdminPage struct {
	Items      []AdminOrder `json:"items"`
	NextCursor *string      `json:"next_cursor"`
}

// AdminFilter narrows the admin order list; "" fields match anything.
type AdminFilter struct {
	Status, SKU, Email string
}

// listedStatuses are the statuses the admin list filters on: the ones
// PostgreSQL records (a pending order is not there yet).
var listedStatuses = []string{StatusConfirmed, StatusPaid, StatusCancelled, StatusExpired, StatusRefunded}

// CheckAdminList reports what is wrong with a filter and a cursor.
func CheckAdminList(f AdminFilter, cursor string) []apperr.FieldError {
	var errs []apperr.FieldError
	if f.Status != "" && !slices.Contains(listedStatuses, f.Status) {
		errs = append(errs, apperr.Field("status", "must be one of %s", strings.Join(listedStatuses, ", ")))
	}
	if f.SKU != "" && !inventory.ValidSKU(f.SKU) {
		errs = append(errs, apperr.Field("sku", "is not a sku"))
	}
	if len(f.Email) > 254 || strings.ContainsFunc(f.Email, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		errs = append(errs, apperr.Field("email", "must be at most 254 characters, without control characters"))
	}
	if _, err := decodeCursor(cursor); err != nil {
		errs = append(errs, apperr.Field("cursor", "is not a cursor this API returned"))
	}
	return errs
}

// AdminList returns the persisted orders that match f, newest first,
// after cursor, at most limit (checked by the caller), with their live
// status from Redis where it ran ahead of PostgreSQL's record. Errors: an
// invalid_request one naming each bad filter, or a 503.
func (s *Service) AdminList(ctx context.Context, f AdminFilter, limit int, cursor string) (AdminPage, error) {
	if errs := CheckAdminList(f, cursor); len(errs) > 0 {
		return AdminPage{}, apperr.Invalid(errs...)
	}
	after, _ := decodeCursor(cursor)
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, err := s.db.Query(ctx, adminListSQL, after.at, after.id, f.Status, f.SKU, f.Email, limit+1)
	if err != nil {
		return AdminPage{}, s.unavailable("list orders", err)
	}
	var buyers [][2]string
	orders, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Order, error) {
		var b [2]string
		o, err := s.scanOrder(withExtra{r, []any{&b[0], &b[1]}})
		buyers = append(buyers, b)
		return o, err
	})
	if err != nil {
		return AdminPage{}, s.unavailable("list orders", err)
	}
	s.overlay(ctx, orders)
	page := paginate(orders, limit)
	s.withPayments(ctx, page.Items)
	out := AdminPage{Items: make([]AdminOrder, len(page.Items)), NextCursor: page.NextCursor}
	for i, o := range page.Items {
		out.Items[i] = AdminOrder{Order: o, UserID: buyers[i][0], Email: buyers[i][1]}
	}
	return out, nil
}

// withExtra is a row whose Scan fills extra after the caller's
// destinations: scanOrder's columns come first in adminListSQL.
type withExtra struct {
	pgx.Row
	extra []any
}

func (r withExtra) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }
