package catalogtest

import (
	"context"
	"errors"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"net/http"
	"slices"
	"testing"
	"time"
)

// A sale window out of range is refused before anything is recorded: no
// sale_rounds row, no live state. (Before 1970 the live state's negative
// milliseconds made the seed script fail after the row was inserted: a
// 503 and a round that never opened.)
func TestSeedWindowOutOfRangeRecordsNothing(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "win", "c", 100)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name, body string
		fields     []string
	}{
		{"starts_before_1970", `{"quantity":5,"starts_at":"1969-12-31T23:59:59Z"}`, []string{"starts_at"}},
		{"starts_before_1970_by_offset", `{"quantity":5,"starts_at":"1970-01-01T00:30:00+01:00"}`, []string{"starts_at"}},
		{"starts_year_1", `{"quantity":5,"starts_at":"0001-01-01T00:00:00Z"}`, []string{"starts_at"}},
		{"starts_year_0", `{"quantity":5,"starts_at":"0000-01-01T00:00:00+01:00"}`, []string{"starts_at"}},
		{"starts_past_9999", `{"quantity":5,"starts_at":"9999-12-31T23:30:00-01:00"}`, []string{"starts_at"}},
		{"ends_before_1970", `{"quantity":5,"ends_at":"1960-06-01T00:00:00Z"}`, []string{"ends_at"}},
		{"ends_past_9999", `{"quantity":5,"ends_at":"9999-12-31T23:59:59-01:00"}`, []string{"ends_at"}},
		{"both_out_of_range", `{"quantity":5,"starts_at":"1900-01-01T00:00:00Z","ends_at":"1901-01-01T00:00:00Z"}`, []string{"starts_at", "ends_at"}},
		{"ends_at_start", `{"quantity":5,"starts_at":"` + future + `","ends_at":"` + future + `"}`, []string{"ends_at"}},
		{"ends_before_start", `{"quantity":5,"starts_at":"2999-01-01T00:00:00Z","ends_at":"2998-01-01T00:00:00Z"}`, []string{"ends_at"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := in.do(t, http.MethodPut, "/api/v1/admin/products/win/stock", tc.body).fields(t)
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("fields = %v, want %v", got, tc.fields)
			}
		})
	}
	// The service refuses the same, whoever calls it.
	_, err := inventory.NewSales(st.db, in.stock).Open(context.Background(), "win",
		inventory.Seed{Quantity: 5, StartsAt: time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)})
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.CodeInvalidRequest {
		t.Fatalf("Open before 1970: %v, want invalid_request", err)
	}
	var rounds int
	if err := st.db.QueryRow(context.Background(), `SELECT count(*) FROM sale_rounds`).Scan(&rounds); err != nil || rounds != 0 {
		t.Fatalf("%d sale rounds recorded (%v), want none", rounds, err)
	}
	if n := st.rdb.Exists(context.Background(), st.prefix+"sale:{win}").Val(); n != 0 {
		t.Fatal("refused seedings left live state")
	}
}

// The ends of the range are accepted, and a round ending in 9999 still
// sells, with its live state set to expire (a week after the end).
func TestSeedWindowAtTheBounds(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "edge", "c", 100)
	rep := in.seed(t, "edge", `{"quantity":5,"per_user_limit":0,"starts_at":"1970-01-01T00:00:00Z","ends_at":"9999-12-31T23:59:59Z"}`)
	if rep.StartsAt == nil || !rep.StartsAt.Equal(time.Unix(0, 0)) || rep.EndsAt == nil || rep.EndsAt.Year() != 9999 {
		t.Fatalf("seeded %+v", rep)
	}
	if _, err := buy(t, st, in.stock, "u", "edge", 2); err != nil {
		t.Fatalf("buying in the widest window: %v", err)
	}
	// Raw milliseconds: go-redis's Duration overflows this far out.
	if ms, err := st.rdb.Do(context.Background(), "PTTL", st.prefix+"sale:{edge}").Int64(); err != nil || ms <= 0 {
		t.Fatalf("the live state of a round with an end has PTTL %d ms (%v)", ms, err)
	}
	got := in.do(t, http.MethodGet, "/api/v1/admin/products/edge/stock", "").stockReport(t)
	if got.Available != 3 || got.EndsAt == nil || !got.EndsAt.Equal(*rep.EndsAt) {
		t.Fatalf("report %+v", got)
	}
}

// Every bad field of a seeding is a 400 naming it, never a 500, and
// nothing is recorded.
func TestSeedBadInput(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "bad-in", "c", 100)
	tests := []struct {
		name, body string
		fields     []string
	}{
		{"quantity_null", `{"quantity":null}`, []string{"quantity"}},
		{"quantity_bool", `{"quantity":true}`, []string{"quantity"}},
		{"quantity_huge", `{"quantity":1e30}`, []string{"quantity"}},
		{"quantity_int64_overflow", `{"quantity":9223372036854775808}`, []string{"quantity"}},
		{"quantity_exponent_fraction", `{"quantity":1.5e0}`, []string{"quantity"}},
		{"quantity_array", `{"quantity":[1]}`, []string{"quantity"}},
		{"limit_over_max", `{"quantity":1,"per_user_limit":1000001}`, []string{"per_user_limit"}},
		{"limit_fraction", `{"quantity":1,"per_user_limit":0.5}`, []string{"per_user_limit"}},
		{"limit_string", `{"quantity":1,"per_user_limit":"1"}`, []string{"per_user_limit"}},
		{"starts_number", `{"quantity":1,"starts_at":1700000000}`, []string{"starts_at"}},
		{"starts_no_zone", `{"quantity":1,"starts_at":"2030-01-01T00:00:00"}`, []string{"starts_at"}},
		{"starts_date_only", `{"quantity":1,"starts_at":"2030-01-01"}`, []string{"starts_at"}},
		{"starts_empty", `{"quantity":1,"starts_at":""}`, []string{"starts_at"}},
		{"ends_year_five_digits", `{"quantity":1,"ends_at":"10000-01-01T00:00:00Z"}`, []string{"ends_at"}},
		{"ends_bad_month", `{"quantity":1,"ends_at":"2030-13-01T00:00:00Z"}`, []string{"ends_at"}},
		{"ends_nul", "{\"quantity\":1,\"ends_at\":\"2030-01-01T00:00:00Z\\u0000\"}", []string{"ends_at"}},
		{"empty_body", ``, []string{"body"}},
		{"malformed", `{"quantity":`, []string{"body"}},
		{"trailing_data", `{"quantity":1} {"quantity":2}`, []string{"body"}},
		{"string_body", `"quantity"`, []string{"body"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := in.do(t, http.MethodPut, "/api/v1/admin/products/bad-in/stock", tc.body).fields(t)
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("fields = %v, want %v", got, tc.fields)
			}
		})
	}
	for _, sku := range []string{"..", ".", "%2e%2e", "-x", "nope"} {
		in.do(t, http.MethodPut, "/api/v1/admin/products/"+sku+"/stock", `{"quantity":1}`).problem(t, http.StatusNotFound, "not_found")
	}
	var rounds int
	if err := st.db.QueryRow(context.Background(), `SELECT count(*) FROM sale_rounds`).Scan(&rounds); err != nil || rounds != 0 {
		t.Fatalf("%d sale rounds recorded (%v), want none", rounds, err)
	}
}
