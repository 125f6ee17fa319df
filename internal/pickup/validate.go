package pickup

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shop-oss/shop/internal/api"
	"github.com/shop-oss/shop/internal/inventory"
)

// ValidID reports whether id has the shape of a store id (the sku rule).
func ValidID(id string) bool { return inventory.ValidSKU(id) }

func bad(field, format string, args ...any) api.FieldError {
	return api.FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

func checkID(id string) []api.FieldError {
	switch {
	case !ValidID(id):
		return []api.FieldError{bad("id", "must be 1 to 64 characters: letters, digits, '-', '_' or '.'")}
	case id == reservedID:
		return []api.FieldError{bad("id", "%q is reserved (GET /api/v1/stores/nearby is the search)", reservedID)}
	}
	return nil
}

func checkName(v string) []api.FieldError {
	switch n := utf8.RuneCountInString(v); {
	case n == 0 || n > maxNameLen:
		return []api.FieldError{bad("name", "must be 1 to %d characters", maxNameLen)}
	case strings.TrimSpace(v) == "":
		return []api.FieldError{bad("name", "must not be blank")}
	case strings.ContainsFunc(v, unicode.IsControl):
		return []api.FieldError{bad("name", "must not contain control characters")}
	}
	return nil
}

func checkAddress(v string) []api.FieldError {
	if utf8.RuneCountInString(v) > maxAddressLen {
		return []api.FieldError{bad("address", "must be at most %d characters", maxAddressLen)}
	}
	if strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' }) {
		return []api.FieldError{bad("address", "must not contain control characters other than line breaks and tabs")}
	}
	return nil
}

// checkCoord checks a longitude (limit MaxLng) or latitude (MaxLat).
func checkCoord(field string, v, limit float64) []api.FieldError {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < -limit || v > limit {
		return []api.FieldError{bad(field, "must be a number from %v to %v", -limit, limit)}
	}
	return nil
}
