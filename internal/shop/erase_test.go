package shop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
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

// Erasing by any spelling of the id (any case, with or without dashes)
// revokes every session over HTTP: the old access token neither reads
// /me nor passes a purchase's check, and the old refresh token rotates
// into nothing. A URN or braced id, or anything else that is not an id,
// is 404 (never a 500) and erases nothing.
func TestEraseUserByAnySpellingOverHTTP(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	_, admin := a.User(t, "admin@example.com", "admin")
	a.Sale(t, "spell", 100, 10, 0)
	for i, spell := range []func(string) string{
		strings.ToUpper,
		func(id string) string { return strings.ReplaceAll(id, "-", "") },
	} {
		email := fmt.Sprintf("spelled%d@example.com", i)
		id, _ := a.Shopper(t, email)
		tok, err := a.Auth.Login(context.Background(), email, shoptest.Password, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"urn:uuid:" + id, "%7B" + id + "%7D", id + "0", "not-an-id", strings.Repeat("f", 40)} {
			if r := a.Do(t, http.MethodDelete, "/api/v1/admin/users/"+bad, admin, ""); r.Status != http.StatusNotFound {
				t.Fatalf("erase %s: %d %s, want 404", bad, r.Status, r.Body)
			}
		}
		if r := a.Do(t, http.MethodGet, "/api/v1/me", tok.AccessToken, ""); r.Status != http.StatusOK {
			t.Fatalf("a refused erasure erased something: /me %d", r.Status)
		}
		if r := a.Do(t, http.MethodDelete, "/api/v1/admin/users/"+spell(id), admin, ""); r.Status != http.StatusNoContent {
			t.Fatalf("erase %s: %d %s", spell(id), r.Status, r.Body)
		}
		if r := a.Do(t, http.MethodGet, "/api/v1/me", tok.AccessToken, ""); r.Status != http.StatusUnauthorized {
			t.Errorf("%s: /me with the old access token: %d, want 401", spell(id), r.Status)
		}
		if r := a.Do(t, http.MethodPost, "/api/v1/products/spell/purchase", tok.AccessToken, `{"quantity":1}`); r.Status != http.StatusUnauthorized {
			t.Errorf("%s: purchase with the old access token: %d %s, want 401", spell(id), r.Status, r.Body)
		}
		body := fmt.Sprintf(`{"refresh_token":%q}`, tok.RefreshToken)
		if r := a.Do(t, http.MethodPost, "/api/v1/auth/refresh", "", body); r.Status != http.StatusUnauthorized {
			t.Errorf("%s: refresh with the old refresh token: %d, want 401", spell(id), r.Status)
		}
	}
}

// Erasure cancels the user's unpaid orders, pending or confirmed, and
// gives their units back exactly once (a repeat gives nothing more),
// even with no payment window (SHOP_PAYMENT_TTL=0), where nothing else
// ever would; the paid order stays paid, and the next shopper buys the
// units back.
func TestEraseUserCancelsUnpaidOrders(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{Config: func(c *config.Config) { c.PaymentTTL = 0 }})
	_, admin := a.User(t, "admin@example.com", "admin")
	a.Sale(t, "held", 100, 5, 0)
	id, token := a.Shopper(t, "holder@example.com")
	buy := func(token string, qty int) string {
		t.Helper()
		r := a.Do(t, http.MethodPost, "/api/v1/products/held/purchase", token, fmt.Sprintf(`{"quantity":%d}`, qty))
		if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
			t.Fatalf("purchase: %d %s", r.Status, r.Body)
		}
		var o struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal(r.Body, &o); err != nil {
			t.Fatal(err)
		}
		return o.OrderID
	}
	paid := buy(token, 1)
	a.Drain(t)
	a.Pay(t, id, paid)
	confirmed := buy(token, 2)
	a.Drain(t)
	pending := buy(token, 2) // not yet written when erased
	ctx := context.Background()
	if r := a.Do(t, http.MethodDelete, "/api/v1/admin/users/"+strings.ToUpper(id), admin, ""); r.Status != http.StatusNoContent {
		t.Fatalf("erase: %d %s", r.Status, r.Body)
	}
	want := map[string]string{paid: order.StatusPaid, confirmed: order.StatusCancelled, pending: order.StatusCancelled}
	for oid, status := range want {
		if o, err := a.Orders.Get(ctx, id, oid); err != nil || o.Status != status {
			t.Errorf("order %s: %q %v, want %s", oid, o.Status, err, status)
		}
	}
	live := func() inventory.LiveRound {
		t.Helper()
		r, _, err := a.Stock.Live(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := live(); r.Available != 4 || r.Released != 4 {
		t.Fatalf("after the erasure: available %d released %d, want 4 and 4", r.Available, r.Released)
	}
	if r := a.Do(t, http.MethodDelete, "/api/v1/admin/users/"+id, admin, ""); r.Status != http.StatusNotFound {
		t.Fatalf("second erase: %d %s", r.Status, r.Body)
	}
	if r := live(); r.Available != 4 || r.Released != 4 {
		t.Fatalf("after a second erasure: available %d released %d, want 4 and 4", r.Available, r.Released)
	}
	_, next := a.Shopper(t, "next@example.com")
	buy(next, 4)
	a.Drain(t)
	aud := audit.New(a.DB.Pool, a.Redis.Client, a.Stock, a.Config.KeyPrefix, a.Log)
	aud.LagBound = 0
	if rep, err := aud.Run(ctx); err != nil || !rep.OK {
		t.Fatalf("audit after the erasure: %+v %v", rep, err)
	}
}
