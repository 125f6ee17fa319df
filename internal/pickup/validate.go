package pickup

import (
	"fmt"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidID reports whether id has the shape of a store id (the sku rule).
func ValidID(id string) bool { return inventory.ValidSKU(id) }

func bad(field, format string, args ...any) apperr.FieldError {
	return apperr.FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

func checkID(id string) []apperr.FieldError {
	switch {
	case !ValidID(id):
		return []apperr.FieldError{bad("id", "must be 1 to 64 characters: letters, digits, '-', '_' or '.'")}
	case id == reservedID:
		return []apperr.FieldError{bad("id", "%q is reserved (GET /api/v1/stores/nearby is the search)", reservedID)}
	}
	return nil
}

func checkName(v string) []apperr.FieldError {
	switch n := utf8.RuneCountInString(v); {
	case n == 0 || n > maxNameLen:
		return []apperr.FieldError{bad("name", "must be 1 to %d characters", maxNameLen)}
	case strings.TrimSpace(v) == "":
		return []apperr.FieldError{bad("name", "must not be blank")}
	case strings.ContainsFunc(v, unicode.IsControl):
		return []apperr.FieldError{bad("name", "must not contain control characters")}
	}
	return nil
}

func checkAddress(v string) []apperr.FieldError {
	if utf8.RuneCountInString(v) > maxAddressLen {
		return []apperr.FieldError{bad("address", "must be at most %d characters", maxAddressLen)}
	}
	if strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' }) {
		return []apperr.FieldError{bad("address", "must not contain control characters other than line breaks and tabs")}
	}
	return nil
}

// checkCoord checks a longitude (limit MaxLng) or latitude (MaxLat).
func checkCoord(field string, v, limit float64) []apperr.FieldError {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < -limit || v > limit {
		return []apperr.FieldError{bad(field, "must be a number from %v to %v", -limit, limit)}
	}
	return nil
}
