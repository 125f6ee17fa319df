package catalogtest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/racetest"
)

func (r result) stockReport(t testing.TB) inventory.StockReport {
	t.Helper()
	var s inventory.StockReport
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatalf("stock %s: %v", r.body, err)
	}
	return s
}

func (in *instance) seed(t testing.TB, sku, body string) inventory.StockReport {
	t.Helper()
	r := in.do(t, http.MethodPut, "/api/v1/admin/products/"+sku+"/stock", body)
	if r.status != http.StatusOK {
		t.Fatalf("seed %s: %d %s", sku, r.status, r.body)
	}
	return r.stockReport(t)
}

// buy places an order through the order service (the reserve script runs
// against the live stock) and returns it as its buyer sees it, pending.
func buy(t testing.TB, st stores, stock *inventory.Stock, user, sku string, qty int) (order.Order, error) {
	t.Helper()
	ctx := context.Background()
	svc := order.New(nil, st.rdb, stock, nil, st.prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), order.Options{})
	p, err := svc.Place(ctx, user, []order.Line{{SKU: sku, Quantity: qty}}, order.PlaceOptions{})
	if err != nil {
		return order.Order{}, err
	}
	return svc.Get(ctx, user, p.OrderID)
}

func TestSeedAndReportStock(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "sale-1", "c", 1999)

	if r := in.do(t, http.MethodGet, "/api/v1/admin/products/sale-1/stock", "").stockReport(t); r.Quantity != 0 || r.Available != 0 || r.RoundID != nil {
		t.Fatalf("never seeded: %+v", r)
	}
	ends := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	got := in.seed(t, "sale-1", `{"quantity":10,"per_user_limit":2,"ends_at":"`+ends.Format(time.RFC3339)+`"}`)
	if got.Quantity != 10 || got.Available != 10 || got.Sold != 0 || got.PerUserLimit != 2 || got.StartsAt != nil ||
		got.EndsAt == nil || !got.EndsAt.Equal(ends) {
		t.Fatalf("seeded: %+v", got)
	}
	if _, err := buy(t, st, in.stock, "u1", "sale-1", 2); err != nil {
		t.Fatal(err)
	}
	rep := in.do(t, http.MethodGet, "/api/v1/admin/products/sale-1/stock", "").stockReport(t)
	if rep.Available != 8 || rep.Sold != 2 || rep.Quantity != 10 || *rep.RoundID != *got.RoundID {
		t.Fatalf("after a purchase: %+v", rep)
	}
	if p := in.do(t, http.MethodGet, "/api/v1/products/sale-1", "").product(t); p.Available != 8 {
		t.Fatalf("product available = %d, want 8", p.Available)
	}
	// Default per-user limit is 1; a new round starts counts from zero.
	again := in.seed(t, "sale-1", `{"quantity":5}`)
	if again.PerUserLimit != 1 || again.Available != 5 || *again.RoundID <= *got.RoundID || again.EndsAt != nil {
		t.Fatalf("reseeded: %+v", again)
	}
	if _, err := buy(t, st, in.stock, "u1", "sale-1", 1); err != nil {
		t.Fatalf("u1 in the new round: %v", err)
	}
}

func TestSeedRefusals(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "sale-2", "c", 100)
	in.seed(t, "sale-2", `{"quantity":3}`)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name, body string
		fields     []string
	}{
		{"missing_quantity", `{}`, []string{"quantity"}},
		{"negative", `{"quantity":-1}`, []string{"quantity"}},
		{"too_big", `{"quantity":10000001}`, []string{"quantity"}},
		{"fraction", `{"quantity":1.5}`, []string{"quantity"}},
		{"string", `{"quantity":"5"}`, []string{"quantity"}},
		{"bad_limit", `{"quantity":5,"per_user_limit":-1}`, []string{"per_user_limit"}},
		{"bad_times", `{"quantity":5,"starts_at":"soon","ends_at":"later"}`, []string{"starts_at", "ends_at"}},
		{"ends_before_start", `{"quantity":5,"starts_at":"` + future + `","ends_at":"` + future + `"}`, []string{"ends_at"}},
		{"ended", `{"quantity":5,"ends_at":"` + past + `"}`, []string{"ends_at"}},
		{"everything", `{"quantity":-5,"per_user_limit":-2,"starts_at":"x"}`, []string{"quantity", "per_user_limit", "starts_at"}},
		{"not_object", `[5]`, []string{"body"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := in.do(t, http.MethodPut, "/api/v1/admin/products/sale-2/stock", tc.body).fields(t)
			if len(got) != len(tc.fields) {
				t.Fatalf("fields = %v, want %v", got, tc.fields)
			}
			for i := range got {
				if got[i] != tc.fields[i] {
					t.Fatalf("fields = %v, want %v", got, tc.fields)
				}
			}
		})
	}
	in.do(t, http.MethodPut, "/api/v1/admin/products/nope/stock", `{"quantity":1}`).problem(t, 404, "not_found")
	in.do(t, http.MethodPut, "/api/v1/admin/products/bad!sku/stock", `{"quantity":1}`).problem(t, 404, "not_found")
	in.do(t, http.MethodGet, "/api/v1/admin/products/nope/stock", "").problem(t, 404, "not_found")
	in.doAs(t, in.users.shopper, http.MethodPut, "/api/v1/admin/products/sale-2/stock", `{"quantity":1}`).problem(t, 403, "forbidden")
	if r := in.do(t, http.MethodGet, "/api/v1/admin/products/sale-2/stock", "").stockReport(t); r.Quantity != 3 || r.Available != 3 {
		t.Fatalf("a refused seeding changed the round: %+v", r)
	}
}

// Re-seeding while buyers race: every reservation belongs to exactly one
// round, no round sells more than it was seeded with, and no buyer gets
// more than the limit within a round.
func TestReseedWhileBuyersRace(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "sale-3", "c", 100)
	first := in.seed(t, "sale-3", `{"quantity":30,"per_user_limit":1}`)
	const buyers, tries = 40, 5
	var second inventory.StockReport
	racetest.Together(append(racetest.Times(buyers, func(u int) {
		for range tries {
			_, _ = buy(t, st, in.stock, "user-"+strconv.Itoa(u), "sale-3", 1)
		}
	}), func() {
		time.Sleep(2 * time.Millisecond)
		second = in.seed(t, "sale-3", `{"quantity":25,"per_user_limit":1}`)
	})...)

	perRound := map[int64]int{}
	perUserRound := map[string]int{}
	events := st.rdb.XRange(context.Background(), st.prefix+"orders", "-", "+").Val()
	for _, e := range events {
		var items []order.ReservedItem
		if err := json.Unmarshal([]byte(e.Values["items"].(string)), &items); err != nil {
			t.Fatal(err)
		}
		perRound[items[0].RoundID] += items[0].Quantity
		perUserRound[e.Values["user_id"].(string)+"/"+strconv.FormatInt(items[0].RoundID, 10)]++
	}
	if perRound[*first.RoundID] > 30 || perRound[*second.RoundID] > 25 || len(perRound) > 2 {
		t.Fatalf("sold per round = %v (rounds %d:30, %d:25)", perRound, *first.RoundID, *second.RoundID)
	}
	for k, n := range perUserRound {
		if n > 1 {
			t.Fatalf("%s bought %d in one round, limit 1", k, n)
		}
	}
	rep := in.do(t, http.MethodGet, "/api/v1/admin/products/sale-3/stock", "").stockReport(t)
	if *rep.RoundID != *second.RoundID || rep.Sold != int64(perRound[*second.RoundID]) || rep.Available != 25-rep.Sold {
		t.Fatalf("report %+v vs events of round %d: %d", rep, *second.RoundID, perRound[*second.RoundID])
	}
}

// Product writes reach the live round: a price change is what the next
// reservation pays; a deleted product can no longer be bought.
func TestProductWritesReachTheLiveRound(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "sale-4", "c", 100)
	in.seed(t, "sale-4", `{"quantity":5,"per_user_limit":0}`)
	in.do(t, http.MethodPut, "/api/v1/admin/products/sale-4",
		`{"name":"n","description":"","category":"c","price_cents":150}`)
	res, err := buy(t, st, in.stock, "u", "sale-4", 2)
	if err != nil || res.TotalCents != 300 {
		t.Fatalf("bought for %d (%v), want the new price 2×150", res.TotalCents, err)
	}
	if r := in.do(t, http.MethodDelete, "/api/v1/admin/products/sale-4", ""); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.status)
	}
	if _, err := buy(t, st, in.stock, "u", "sale-4", 1); err == nil {
		t.Fatal("a deleted product was sold")
	}
	if st.rdb.Exists(context.Background(), st.prefix+"sale:{sale-4}").Val() != 0 {
		t.Fatal("the sale state outlived the product")
	}
}
