package server

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
)

// Query numbers have one form, a JSON number's (RFC 8259 §6), as in the
// request bodies: what any JSON encoder prints is taken, and nothing more
// of what strconv alone takes (1_0 is 10 to ParseFloat, 0x1p3 is 8; +5,
// 05, .5, 5., Inf, NaN, white space), which a proxy, a log query or a
// client's own check may read as another number or none.
//
//   - A number: an optional minus, digits without a leading zero, an
//     optional fraction and exponent, a finite value. The exponent stays
//     because encoders print it: JavaScript's String(0.0000001) is 1e-7.
//   - An integer: no fraction, no exponent (as json.Unmarshal into an
//     int), no -0: exactly what strconv.FormatInt prints, within int64.
//     The caller's range decides whether a negative makes sense.
//   - An empty value (?limit=, as a form sends it) is absent and takes
//     its default, like every other query parameter.

// ParseQueryInt parses s as an integer query parameter. ok is false for
// anything but an integer's one form (see above) or a value beyond int64.
func ParseQueryInt(s string) (n int64, ok bool) {
	if s == "-0" || !numberForm(s, false) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// ParseQueryFloat parses s as a number query parameter. ok is false for
// anything but a JSON number or one whose value is not finite (1e400).
func ParseQueryFloat(s string) (v float64, ok bool) {
	if !numberForm(s, true) {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && !math.IsInf(v, 0)
}

// numberForm tells whether s is a JSON number, an integer one (no
// fraction, no exponent) unless real.
func numberForm(s string, real bool) bool {
	s = strings.TrimPrefix(s, "-")
	n := digits(s)
	if n == 0 || (s[0] == '0' && n > 1) {
		return false
	}
	s = s[n:]
	if !real {
		return s == ""
	}
	if rest, ok := strings.CutPrefix(s, "."); ok {
		if n = digits(rest); n == 0 {
			return false
		}
		s = rest[n:]
	}
	if s != "" && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s != "" && (s[0] == '+' || s[0] == '-') {
			s = s[1:]
		}
		if n = digits(s); n == 0 {
			return false
		}
		s = s[n:]
	}
	return s == ""
}

// digits counts the ASCII digits s starts with.
func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// queryValue is the query parameter name and whether it has a value: an
// empty one (?limit=, ?limit) is absent, as for every other parameter
// (?period=, ?cursor=, ?from=), since forms and URL templates send it so.
func queryValue(c *fiber.Ctx, name string) (string, bool) {
	v := c.Query(name)
	return v, v != ""
}

// QueryInt reads the integer query parameter name: def when absent or
// empty, else an integer (ParseQueryInt) from lo to hi. A bad one is
// added to bad, named, and def returned, so that a handler can answer
// every bad parameter at once.
func QueryInt(c *fiber.Ctx, name string, def, lo, hi int, bad *[]apperr.FieldError) int {
	raw, there := queryValue(c, name)
	if !there {
		return def
	}
	n, ok := ParseQueryInt(raw)
	if !ok || n < int64(lo) || n > int64(hi) {
		*bad = append(*bad, apperr.FieldError{Field: name, Message: fmt.Sprintf("must be an integer from %d to %d", lo, hi)})
		return def
	}
	return int(n)
}

// QueryFloat reads the number query parameter name; there is false when
// it is absent or empty (the caller's default, or its error for a
// required one). One that is not a number (ParseQueryFloat), or for
// which in is false, is added to bad, named, with rule as its message.
func QueryFloat(c *fiber.Ctx, name string, in func(float64) bool, rule string, bad *[]apperr.FieldError) (v float64, there bool) {
	raw, there := queryValue(c, name)
	if !there {
		return 0, false
	}
	v, ok := ParseQueryFloat(raw)
	if !ok || !in(v) {
		*bad = append(*bad, apperr.FieldError{Field: name, Message: rule})
	}
	return v, true
}

// Page is a listing's paging parameters.
type Page struct {
	Limit int // the default when ?limit= is absent
	// Cursor is ?cursor=, copied (Fiber reuses its buffers); "" asks for
	// the first page. Its form is the listing's to check.
	Cursor string
}

// PageQuery reads the ?limit= and ?cursor= of every listing: limit is def
// when absent, else an integer from 1 to max (QueryInt). A bad limit
// comes back as a apperr.FieldError, so that the listing can report it in
// one answer with its own parameter checks (the cursor's among them).
func PageQuery(c *fiber.Ctx, def, max int) (Page, *apperr.FieldError) {
	var bad []apperr.FieldError
	p := Page{Limit: QueryInt(c, "limit", def, 1, max, &bad), Cursor: strings.Clone(c.Query("cursor"))}
	if len(bad) > 0 {
		return p, &bad[0]
	}
	return p, nil
}
