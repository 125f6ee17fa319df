package shop_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/shop-oss/shop/internal/shop/shoptest"
)

type customerPage struct {
	Items []struct {
		ID, Email, Role string
		Orders          int64
	}
	NextCursor *string `json:"next_cursor"`
}

// customers pages through GET /api/v1/admin/users?email=prefix, limit at
// a time, and returns "email:orders" in the order served.
func customers(t *testing.T, a *shoptest.App, admin, prefix, limit string) []string {
	t.Helper()
	var got []string
	q := url.Values{"email": {prefix}, "limit": {limit}}
	for range 50 {
		var p customerPage
		a.Do(t, http.MethodGet, "/api/v1/admin/users?"+q.Encode(), admin, "").Decode(t, http.StatusOK, &p)
		for _, c := range p.Items {
			got = append(got, c.Email+":"+string(rune('0'+c.Orders)))
		}
		if p.NextCursor == nil {
			return got
		}
		q.Set("cursor", *p.NextCursor)
	}
	t.Fatal("the list does not end")
	return nil
}

func TestAdminListsCustomersByEmailPrefix(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	_, admin := a.User(t, "root@example.com", "admin")
	a.Sale(t, "tee", 100, 10, 0)
	alice, aliceToken := a.Shopper(t, "Alice@Example.com")
	a.Shopper(t, "alibaba@example.com")
	a.Shopper(t, "al_x@example.com")
	a.Shopper(t, "al%y@example.com")
	a.Shopper(t, "bob@example.com")
	gone, _ := a.Shopper(t, "ali-erased@example.com")
	for range 2 {
		if r := a.Do(t, http.MethodPost, "/api/v1/products/tee/purchase", aliceToken, `{"quantity":1}`); r.Status != http.StatusAccepted {
			t.Fatalf("purchase: %d %s", r.Status, r.Body)
		}
	}
	a.Drain(t)
	if r := a.Do(t, http.MethodDelete, "/api/v1/admin/users/"+gone, admin, ""); r.Status != http.StatusNoContent {
		t.Fatalf("erase: %d %s", r.Status, r.Body)
	}
	all := []string{"al%y@example.com:0", "al_x@example.com:0", "alibaba@example.com:0", "Alice@Example.com:2",
		"bob@example.com:0", "root@example.com:0"}
	for _, tc := range []struct{ prefix, limit string }{{"", "50"}, {"", "1"}, {"", "4"}} {
		if got := customers(t, a, admin, tc.prefix, tc.limit); !slices.Equal(got, all) {
			t.Errorf("all, limit %s: %v, want %v", tc.limit, got, all)
		}
	}
	for prefix, want := range map[string][]string{
		"ALI":               {"alibaba@example.com:0", "Alice@Example.com:2"},
		"alice@example.COM": {"Alice@Example.com:2"},
		"al_":               {"al_x@example.com:0"}, // LIKE's wildcards are plain characters
		"al%":               {"al%y@example.com:0"},
		"nobody":            nil,
	} {
		if got := customers(t, a, admin, prefix, "1"); !slices.Equal(got, want) {
			t.Errorf("email=%s: %v, want %v", prefix, got, want)
		}
	}
	var p customerPage
	a.Do(t, http.MethodGet, "/api/v1/admin/users?email=alice", admin, "").Decode(t, http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].ID != alice || p.Items[0].Role != "shopper" {
		t.Fatalf("alice: %+v", p)
	}
}

func TestAdminUserListBadQuery(t *testing.T) {
	t.Parallel()
	wantAdminListRefusals(t, "/api/v1/admin/users", []badQuery{
		{"limit_zero", "limit=0", []string{"limit"}},
		{"limit_over", "limit=501", []string{"limit"}},
		{"limit_text", "limit=x", []string{"limit"}},
		{"cursor_garbage", "cursor=abc", []string{"cursor"}},
		{"cursor_not_ours", "cursor=" + url.QueryEscape("WyJhIiwiYiJd"), []string{"cursor"}},
		{"email_control", "email=a%0Ab", []string{"email"}},
		{"all_three", "limit=0&cursor=x&email=%00", []string{"limit", "email", "cursor"}},
	})
}
