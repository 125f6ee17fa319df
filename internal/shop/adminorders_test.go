package shop_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

type adminOrderPage struct {
	Items []struct {
		OrderID string `json:"order_id"`
		Status  string
		UserID  string `json:"user_id"`
		Email   string
	}
	NextCursor *string `json:"next_cursor"`
}

// adminOrders pages through GET /api/v1/admin/orders?query, limit 1 and
// 500, checks both give the same list, and returns "id:status:email".
func adminOrders(t *testing.T, a *shoptest.App, admin string, query url.Values) []string {
	t.Helper()
	var lists [][]string
	for _, limit := range []string{"1", "500"} {
		q := url.Values{"limit": {limit}}
		for k, v := range query {
			q[k] = v
		}
		var got []string
		for range 50 {
			var p adminOrderPage
			a.Do(t, http.MethodGet, "/api/v1/admin/orders?"+q.Encode(), admin, "").Decode(t, http.StatusOK, &p)
			for _, o := range p.Items {
				got = append(got, o.OrderID+":"+o.Status+":"+o.Email+":"+o.UserID)
			}
			if p.NextCursor == nil {
				break
			}
			q.Set("cursor", *p.NextCursor)
		}
		lists = append(lists, got)
	}
	if !slices.Equal(lists[0], lists[1]) {
		t.Fatalf("%v: limit 1 %v, limit 500 %v", query, lists[0], lists[1])
	}
	return lists[0]
}

func TestAdminListsOrdersNewestFirst(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	_, admin := a.User(t, "root@example.com", "admin")
	a.Sale(t, "tee", 100, 10, 0)
	a.Sale(t, "mug", 100, 10, 0)
	ann, annTok := a.Shopper(t, "Ann@Example.com")
	bob, bobTok := a.Shopper(t, "bob@example.com")
	buy := func(tok, sku string) string {
		r := a.Do(t, http.MethodPost, "/api/v1/products/"+sku+"/purchase", tok, `{"quantity":1}`)
		var p struct {
			OrderID string `json:"order_id"`
		}
		r.Decode(t, http.StatusAccepted, &p)
		return p.OrderID
	}
	o1, o2, o3 := buy(annTok, "tee"), buy(bobTok, "mug"), buy(annTok, "mug")
	a.Drain(t)
	a.Pay(t, ann, o1)
	a.Cancel(t, bob, o2)
	a.Drain(t)
	row := func(id, status, email, user string) string { return id + ":" + status + ":" + email + ":" + user }
	rows := map[string]string{o1: row(o1, "paid", "Ann@Example.com", ann), o2: row(o2, "cancelled", "bob@example.com", bob),
		o3: row(o3, "confirmed", "Ann@Example.com", ann)}
	// Newest first; orders accepted in the same millisecond by id.
	var newest []string
	dbRows, _ := a.DB.Pool.Query(context.Background(), `SELECT id::text FROM orders ORDER BY created_at DESC, id DESC`)
	ids, err := pgx.CollectRows(dbRows, pgx.RowTo[string])
	if err != nil || len(ids) != 3 {
		t.Fatalf("orders in PostgreSQL: %v %v", ids, err)
	}
	for _, id := range ids {
		newest = append(newest, rows[id])
	}
	r1, r2, r3 := rows[o1], rows[o2], rows[o3]
	only := func(keep ...string) []string { // newest, filtered
		var out []string
		for _, r := range newest {
			if slices.Contains(keep, r) {
				out = append(out, r)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		query url.Values
		want  []string
	}{
		{"all", url.Values{}, newest},
		{"paid", url.Values{"status": {"paid"}}, []string{r1}},
		{"confirmed", url.Values{"status": {"confirmed"}}, []string{r3}},
		{"expired", url.Values{"status": {"expired"}}, nil},
		{"sku", url.Values{"sku": {"mug"}}, only(r3, r2)},
		{"email_any_case", url.Values{"email": {"ANN@example.COM"}}, only(r3, r1)},
		{"email_is_not_a_prefix", url.Values{"email": {"ann"}}, nil},
		{"all_three", url.Values{"email": {"ann@example.com"}, "sku": {"mug"}, "status": {"confirmed"}}, []string{r3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := adminOrders(t, a, admin, tc.query); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAdminOrderListBadQuery(t *testing.T) {
	t.Parallel()
	wantAdminListRefusals(t, "/api/v1/admin/orders", []badQuery{
		{"limit_zero", "limit=0", []string{"limit"}},
		{"limit_over", "limit=501", []string{"limit"}},
		{"status_unknown", "status=lost", []string{"status"}},
		{"sku_bad", "sku=" + url.QueryEscape("a b"), []string{"sku"}},
		{"sku_long", "sku=" + strings.Repeat("a", 65), []string{"sku"}},
		{"email_control", "email=a%0Ab", []string{"email"}},
		{"cursor_garbage", "cursor=zz", []string{"cursor"}},
		{"all", "limit=x&status=x&sku=%21&email=%00&cursor=x", []string{"limit", "status", "sku", "email", "cursor"}},
	})
}

// badQuery is a query an admin list refuses, and the fields its 400 names.
type badQuery struct {
	name, query string
	fields      []string
}

// wantAdminListRefusals checks the admin list at path: each bad query is a
// 400 naming its fields, and the list is the admin's alone (403 for a
// shopper, 401 without a token).
func wantAdminListRefusals(t *testing.T, path string, queries []badQuery) {
	t.Helper()
	a := shoptest.New(t, shoptest.Options{})
	_, admin := a.User(t, "root@example.com", "admin")
	_, shopper := a.Shopper(t, "s@example.com")
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			openapitest.WantInvalid(t, a.Do(t, http.MethodGet, path+"?"+q.query, admin, ""), q.fields)
		})
	}
	openapitest.WantProblem(t, a.Do(t, http.MethodGet, path, shopper, ""), http.StatusForbidden, "forbidden")
	openapitest.WantProblem(t, a.Do(t, http.MethodGet, path, "", ""), http.StatusUnauthorized, "unauthorized")
}
