package pickup

import (
	"math"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
)

// ValidID reports whether id has the shape of a store id (the sku rule).
func ValidID(id string) bool { return inventory.ValidSKU(id) }

func checkID(id string) []apperr.FieldError {
	switch {
	case !ValidID(id):
		return []apperr.FieldError{apperr.Field("id", "must be 1 to 64 characters: letters, digits, '-', '_' or '.'")}
	case id == reservedID:
		return []apperr.FieldError{apperr.Field("id", "%q is reserved (GET /api/v1/stores/nearby is the search)", reservedID)}
	}
	return nil
}

// checkCoord checks a longitude (limit MaxLng) or latitude (MaxLat).
func checkCoord(field string, v, limit float64) []apperr.FieldError {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < -limit || v > limit {
		return []apperr.FieldError{apperr.Field(field, "must be a number from %v to %v", -limit, limit)}
	}
	return nil
}
