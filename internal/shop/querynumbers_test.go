package shop_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// Every route that reads a number from its query reads it by one rule
// (server.ParseQueryInt, server.ParseQueryFloat): a form strconv alone
// takes answers 400 invalid_request naming the parameter, never a number
// read some other way; an empty value is absent, as for every parameter.
func TestQueryNumbersHaveOneForm(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	_, shopper := a.Shopper(t, "numbers@example.com")
	_, admin := a.User(t, "numbers-admin@example.com", "admin")
	routes := []struct {
		name, path, token, param string
		real                     bool // a number with a fraction; else an integer
	}{
		{"products_limit", "/api/v1/products?", "", "limit", false},
		{"orders_limit", "/api/v1/orders?", shopper, "limit", false},
		{"best_sellers_limit", "/api/v1/best-sellers?", "", "limit", false},
		{"best_seller_around", "/api/v1/best-sellers/mug?", "", "around", false},
		{"nearby_lng", "/api/v1/stores/nearby?lat=48&", "", "lng", true},
		{"nearby_lat", "/api/v1/stores/nearby?lng=2&", "", "lat", true},
		{"nearby_radius", "/api/v1/stores/nearby?lng=2&lat=48&", "", "radius_km", true},
		{"nearby_limit", "/api/v1/stores/nearby?lng=2&lat=48&", "", "limit", false},
		{"entries_limit", "/api/v1/admin/products/mug/queue/entries?", admin, "limit", false},
	}
	// Each is a value that would be in range if it were read as a number
	// (1_0 is 10 to strconv.ParseFloat, +5 and 05 are 5 to strconv.Atoi).
	bad := []struct{ name, value string }{
		{"underscore", "1_0"},
		{"hex", "0x10"},
		{"hex_float", "0x1p3"},
		{"octal_prefix", "0o7"},
		{"plus", "%2B5"},
		{"plus_as_space", "+5"},
		{"leading_space", "%205"},
		{"trailing_space", "5%20"},
		{"tab", "5%09"},
		{"leading_zero", "05"},
		{"leading_dot", ".5"},
		{"trailing_dot", "5."},
		{"comma", "1,5"},
		{"inf", "Inf"},
		{"infinity", "infinity"},
		{"nan", "NaN"},
		{"arabic_indic_digit", "%D9%A5"},
		{"nul", "5%00"},
		{"exponent_no_digits", "5e"},
	}
	for _, rt := range routes {
		cases := bad
		if !rt.real {
			cases = append(cases, []struct{ name, value string }{{"exponent", "1e1"}, {"fraction", "5.0"}, {"minus_zero", "-0"}}...)
		}
		for _, b := range cases {
			t.Run(rt.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				r := a.Do(t, http.MethodGet, rt.path+rt.param+"="+b.value, rt.token, "")
				openapitest.WantProblem(t, r, http.StatusBadRequest, "invalid_request")
				var p struct {
					Errors []struct{ Field string } `json:"errors"`
				}
				if err := json.Unmarshal(r.Body, &p); err != nil || len(p.Errors) != 1 || p.Errors[0].Field != rt.param {
					t.Fatalf("%s=%s: errors %s, want one naming %s", rt.param, b.value, r.Body, rt.param)
				}
			})
		}
	}
	// The forms a JSON body takes are taken: a minus, a fraction, an
	// exponent (for a number with a fraction).
	for _, path := range []string{
		"/api/v1/stores/nearby?lng=-12.5&lat=-0&radius_km=1e3&limit=50",
		"/api/v1/stores/nearby?lng=2.35E0&lat=48.86&radius_km=0.5",
		"/api/v1/products?limit=100",
		"/api/v1/best-sellers?limit=1",
		"/api/v1/best-sellers?period=all&limit=10",
		// Empty values are absent: the defaults, as a form sends them.
		"/api/v1/best-sellers?period=&limit=",
		"/api/v1/products?limit=&cursor=",
		"/api/v1/stores/nearby?lng=2&lat=48&radius_km=&limit=",
	} {
		shoptest.WantStatus(t, a.Do(t, http.MethodGet, path, "", ""), http.StatusOK)
	}
}
