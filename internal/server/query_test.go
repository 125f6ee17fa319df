package server

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
)

func TestParseQueryNumbers(t *testing.T) {
	tests := []struct {
		name, in string
		int      bool    // ParseQueryInt takes it
		real     bool    // ParseQueryFloat takes it
		want     float64 // the value of either
	}{
		{"zero", "0", true, true, 0},
		{"digits", "42", true, true, 42},
		{"negative", "-7", true, true, -7},
		{"int64_max", "9223372036854775807", true, true, math.MaxInt64},
		{"fraction", "-12.5", false, true, -12.5},
		{"zero_fraction", "0.05", false, true, 0.05},
		{"exponent", "1e3", false, true, 1000},
		{"exponent_upper_signed", "2.5E-1", false, true, 0.25},
		{"exponent_plus", "1e+2", false, true, 100},
		{"minus_zero", "-0", false, true, 0},
		{"over_int64", "9223372036854775808", false, true, 9223372036854775808},
		{"empty", "", false, false, 0},
		{"underscore", "1_0", false, false, 0},
		{"hex", "0x10", false, false, 0},
		{"hex_float", "0x1p4", false, false, 0},
		{"octal", "0o7", false, false, 0},
		{"binary", "0b1", false, false, 0},
		{"plus", "+5", false, false, 0},
		{"leading_space", " 5", false, false, 0},
		{"trailing_space", "5 ", false, false, 0},
		{"trailing_newline", "5\n", false, false, 0},
		{"leading_zero", "05", false, false, 0},
		{"leading_zero_fraction", "05.5", false, false, 0},
		{"leading_dot", ".5", false, false, 0},
		{"trailing_dot", "5.", false, false, 0},
		{"minus_dot", "-.5", false, false, 0},
		{"lone_minus", "-", false, false, 0},
		{"double_minus", "--5", false, false, 0},
		{"exponent_no_digits", "1e", false, false, 0},
		{"exponent_sign_only", "1e-", false, false, 0},
		{"exponent_alone", "e5", false, false, 0},
		{"comma", "1,5", false, false, 0},
		{"inf", "Inf", false, false, 0},
		{"minus_inf", "-Inf", false, false, 0},
		{"infinity", "infinity", false, false, 0},
		{"nan", "NaN", false, false, 0},
		{"overflow", "1e400", false, false, 0},
		{"arabic_indic_digit", "\u0665", false, false, 0},
		{"fullwidth_digit", "\uff15", false, false, 0},
		{"nul", "5\x00", false, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := ParseQueryInt(tc.in)
			if ok != tc.int || (ok && float64(n) != tc.want) {
				t.Errorf("ParseQueryInt(%q) = %d, %v; want ok=%v", tc.in, n, ok, tc.int)
			}
			f, ok := ParseQueryFloat(tc.in)
			if ok != tc.real || (ok && f != tc.want) {
				t.Errorf("ParseQueryFloat(%q) = %v, %v; want ok=%v", tc.in, f, ok, tc.real)
			}
		})
	}
}

// The grammars, as RFC 8259 §6 writes a JSON number: an oracle that
// shares no code with the parsers.
var (
	jsonNumber  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	jsonInteger = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)
)

// FuzzQueryNumbers: a query number is taken exactly when it has the
// grammar's form and a value (finite; an integer within int64), and then
// with strconv's value; every integer is also a number.
func FuzzQueryNumbers(f *testing.F) {
	for _, s := range []string{"0", "-0", "10", "1_0", "0x10", "0x1p-2", "+5", " 5", "05", ".5", "5.", "1e3", "-12.5E+07",
		"Inf", "NaN", "1e400", "1e-400", "9223372036854775808", "-9223372036854775808", "\u0665", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := strconv.ParseFloat(s, 64)
		wantReal := jsonNumber.MatchString(s) && err == nil && !math.IsInf(v, 0)
		got, ok := ParseQueryFloat(s)
		if ok != wantReal || (ok && got != v) {
			t.Fatalf("ParseQueryFloat(%q) = %v, %v; want %v, %v", s, got, ok, v, wantReal)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		wantInt := jsonInteger.MatchString(s) && err == nil
		gotN, ok := ParseQueryInt(s)
		if ok != wantInt || (ok && gotN != n) {
			t.Fatalf("ParseQueryInt(%q) = %d, %v; want %d, %v", s, gotN, ok, n, wantInt)
		}
		if _, real := ParseQueryFloat(s); ok && !real {
			t.Fatalf("%q is an integer but not a number", s)
		}
	})
}

// An absent or empty parameter takes its default; any other must be a
// number.
func TestQueryIntPresence(t *testing.T) {
	app := fiber.New()
	app.Get("/", func(c *fiber.Ctx) error {
		var bad []apperr.FieldError
		n := QueryInt(c, "limit", 20, 1, 100, &bad)
		return c.JSON(fiber.Map{"n": n, "bad": len(bad)})
	})
	for _, tc := range []struct {
		query string
		n     float64
		bad   float64
	}{
		{"", 20, 0}, {"?other=1", 20, 0}, {"?limit=7", 7, 0}, {"?limit=", 20, 0}, {"?limit", 20, 0}, {"?limit=0", 20, 1},
		{"?limit=7&limit=x", 7, 0}, // the first value, as c.Query reads it
	} {
		resp, err := app.Test(httptest.NewRequest(http.MethodGet, "/"+tc.query, nil))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]float64
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got["n"] != tc.n || got["bad"] != tc.bad {
			t.Errorf("%q: %v %v, want n=%v bad=%v", tc.query, got, err, tc.n, tc.bad)
		}
	}
}
