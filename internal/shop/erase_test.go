package shop_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// An erasure racing a purchase: the order accepted before the erasure is
// persisted (the anonymised row keeps its foreign key), nothing is
// dead-lettered, no unit leaks (the audit holds), the erased shopper's
// token is refused at once, and the admin route answers 204 then 404.
func TestEraseUserKeepsTheirOrders(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	_, admin := a.User(t, "admin@example.com", "admin")
	a.Sale(t, "gdpr", 100, 10, 2)
	id, token := a.Shopper(t, "erased@example.com")
	if r := a.Do(t, http.MethodPost, "/api/v1/products/gdpr/purchase", token, `{"quantity":2}`); r.Status != http.StatusAccepted && r.Status != http.StatusOK {
		t.Fatalf("purchase: %d %s", r.Status, r.Body)
	}
	// Erased before the writer persists the order.
	if r := a.Do(t, http.MethodDelete, "/api/v1/admin/users/"+id, admin, ""); r.Status != http.StatusNoContent {
		t.Fatalf("erase: %d %s", r.Status, r.Body)
	}
	if r := a.Do(t, http.MethodGet, "/api/v1/me", token, ""); r.Status != http.StatusUnauthorized {
		t.Fatalf("the erased shopper's token: %d", r.Status)
	}
	if r := a.Do(t, http.MethodDelete, "/api/v1/admin/users/"+id, admin, ""); r.Status != http.StatusNotFound {
		t.Fatalf("second erase: %d %s", r.Status, r.Body)
	}
	a.Drain(t)
	ctx := context.Background()
	var orders int
	if err := a.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE user_id = $1`, id).Scan(&orders); err != nil || orders != 1 {
		t.Fatalf("orders of the erased user: %d %v, want 1", orders, err)
	}
	aud := audit.New(a.DB.Pool, a.Redis.Client, a.Stock, a.Config.KeyPrefix, a.Log)
	aud.LagBound = 0
	rep, err := aud.Run(ctx)
	if err != nil || !rep.OK {
		t.Fatalf("audit after the erasure: %+v %v", rep, err)
	}
}
