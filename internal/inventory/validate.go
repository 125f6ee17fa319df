package inventory

import (
	"encoding/base64"
	"github.com/shop-oss/shop/internal/apperr"
	"strconv"
	"strings"
)

// Limits of product fields (docs/api.md). MaxPriceCents keeps every order total
// exact: the order package's reserve script adds in Lua numbers, doubles
// that are exact only up to 2^53, and its largest order is 1e14 (the check
// stands beside its own limits, in internal/order).
const (
	maxNameLen        = 200
	maxDescriptionLen = 5000
	MaxPriceCents     = 100_000_000
)

// A code is the shape of a sku and of a category: 1 to 64 of letters,
// digits, '.', '_' and '-', the first a letter or digit
// (^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$). It keeps them safe inside Redis
// keys and cursors. The first character is a letter or digit, so a sku is
// never "." or "..": as a path segment those are dot-segments, which HTTP
// clients resolve away (DELETE /cart/items/.. reaches the server as
// DELETE /cart/), so such a product could never be addressed.
const maxCodeLen = 64

// CodeRule says what a code is, for field errors.
const CodeRule = "must be 1 to 64 characters: letters, digits, '-', '_' or '.', starting with a letter or digit"

// validCode reports whether s is a code. It is the regular expression
// above written out (validate_test.go holds them to each other): every
// request naming a product checks its sku, and the regexp was 1.4 % of a
// product read's CPU.
func validCode(s string) bool {
	if len(s) == 0 || len(s) > maxCodeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidSKU reports whether s has the shape of a sku.
func ValidSKU(s string) bool { return validCode(s) }

func checkCode(name, v string) []apperr.FieldError {
	if !validCode(v) {
		return []apperr.FieldError{apperr.Field(name, CodeRule)}
	}
	return nil
}

func checkPrice(v int64) []apperr.FieldError {
	if v < 0 || v > MaxPriceCents {
		return []apperr.FieldError{apperr.Field("price_cents", "must be an integer from 0 to %d", int64(MaxPriceCents))}
	}
	return nil
}

// validateInput lists every invalid field of in.
func validateInput(in ProductInput) []apperr.FieldError {
	var errs []apperr.FieldError
	errs = append(errs, apperr.CheckName("name", in.Name, maxNameLen)...)
	errs = append(errs, apperr.CheckText("description", in.Description, maxDescriptionLen)...)
	errs = append(errs, checkCode("category", in.Category)...)
	return append(errs, checkPrice(in.PriceCents)...)
}

// invalid is nil when errs is empty, else the invalid_request error.
func invalid(errs []apperr.FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return apperr.Invalid(errs...)
}

// validateList checks a listing's parameters; limit 0 means the default.
func validateList(category string, limit int, cursor string) []apperr.FieldError {
	var errs []apperr.FieldError
	if category != "" {
		errs = append(errs, checkCode("category", category)...)
	}
	if limit < 0 || limit > MaxLimit {
		errs = append(errs, apperr.Field("limit", "must be an integer from 1 to %d", MaxLimit))
	}
	if _, ok := decodeCursor(cursor); !ok {
		errs = append(errs, apperr.Field("cursor", "is not a cursor this API returned"))
	}
	return errs
}

// A cursor is where the next page starts (listCursor): "<chunk>:<sku>",
// base64url-encoded, opaque to clients; validated when it comes back. A
// cursor of just "<sku>" (handed out before chunks) is still read, with
// no chunk.
func encodeCursor(c listCursor) string {
	s := c.after
	if c.chunk >= 0 {
		s = strconv.Itoa(c.chunk) + ":" + s
	}
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// maxChunk bounds a cursor's chunk number (a billion products at 100 a
// chunk), so that an offset never overflows.
const maxChunk = 10_000_000

// decodeCursor returns where the page starts (chunk 0, after "" for the
// first page). Only encodeCursor's exact output is a cursor: the decoder
// alone would also take line breaks and other spellings of the same bytes.
func decodeCursor(cursor string) (listCursor, bool) {
	if cursor == "" {
		return listCursor{}, true
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	if err != nil {
		return listCursor{}, false
	}
	c := listCursor{chunk: -1, after: string(b)}
	if k, sku, ok := strings.Cut(c.after, ":"); ok {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n > maxChunk {
			return listCursor{}, false
		}
		c = listCursor{chunk: n, after: sku}
	}
	if !validCode(c.after) || encodeCursor(c) != cursor {
		return listCursor{}, false
	}
	return c, true
}
