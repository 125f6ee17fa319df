package server

import (
	"net/http"
	"strconv"

	"github.com/shop-oss/shop/internal/apperr"
)

// statusOf is the single table from code to HTTP status.
var statusOf = map[string]int{
	apperr.CodeInvalidRequest:     http.StatusBadRequest,
	apperr.CodeUnauthorized:       http.StatusUnauthorized,
	apperr.CodeInvalidCredentials: http.StatusUnauthorized,
	apperr.CodeInvalidToken:       http.StatusUnauthorized,
	apperr.CodeForbidden:          http.StatusForbidden,
	apperr.CodeNotFound:           http.StatusNotFound,
	apperr.CodeMethodNotAllowed:   http.StatusMethodNotAllowed,
	apperr.CodeEmailTaken:         http.StatusConflict,
	apperr.CodeSKUTaken:           http.StatusConflict,
	apperr.CodeOutOfStock:         http.StatusConflict,
	apperr.CodeLimitExceeded:      http.StatusConflict,
	apperr.CodePassRequired:       http.StatusForbidden,
	apperr.CodeChallengeFailed:    http.StatusForbidden,
	apperr.CodeInvalidSignature:   http.StatusBadRequest,
	apperr.CodeSaleNotActive:      http.StatusConflict,
	apperr.CodeCartEmpty:          http.StatusConflict,
	apperr.CodeIdempotencyReused:  http.StatusUnprocessableEntity,
	apperr.CodePaymentDeclined:    http.StatusPaymentRequired,
	apperr.CodeOrderPending:       http.StatusConflict,
	apperr.CodeOrderNotPayable:    http.StatusConflict,
	apperr.CodeNotCancellable:     http.StatusConflict,
	apperr.CodeNotRefundable:      http.StatusConflict,
	apperr.CodeAlreadyEntered:     http.StatusConflict,
	apperr.CodeDrawClosed:         http.StatusConflict,
	apperr.CodeConflict:           http.StatusConflict,
	apperr.CodePayloadTooLarge:    http.StatusRequestEntityTooLarge,
	apperr.CodeUnsupportedMedia:   http.StatusUnsupportedMediaType,
	apperr.CodeHeadersTooLarge:    http.StatusRequestHeaderFieldsTooLarge,
	apperr.CodeRequestTimeout:     http.StatusRequestTimeout,
	apperr.CodeRateLimited:        http.StatusTooManyRequests,
	apperr.CodeInternal:           http.StatusInternalServerError,
	apperr.CodeUnavailable:        http.StatusServiceUnavailable,
}

// codeOf is the reverse table, for errors that carry only a status (Fiber's).
var codeOf = map[int]string{
	http.StatusBadRequest:                  apperr.CodeInvalidRequest,
	http.StatusUnauthorized:                apperr.CodeUnauthorized,
	http.StatusForbidden:                   apperr.CodeForbidden,
	http.StatusNotFound:                    apperr.CodeNotFound,
	http.StatusMethodNotAllowed:            apperr.CodeMethodNotAllowed,
	http.StatusConflict:                    apperr.CodeConflict,
	http.StatusRequestEntityTooLarge:       apperr.CodePayloadTooLarge,
	http.StatusUnsupportedMediaType:        apperr.CodeUnsupportedMedia,
	http.StatusRequestHeaderFieldsTooLarge: apperr.CodeHeadersTooLarge,
	http.StatusRequestTimeout:              apperr.CodeRequestTimeout,
	http.StatusTooManyRequests:             apperr.CodeRateLimited,
	http.StatusServiceUnavailable:          apperr.CodeUnavailable,
}

// statusFor is the HTTP status for an error's code (500 for an unknown code).
func statusFor(e *apperr.Error) int {
	if s, ok := statusOf[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// codeForStatus names a status that came without a code.
func codeForStatus(status int) string {
	if c, ok := codeOf[status]; ok {
		return c
	}
	if status >= 500 {
		return apperr.CodeInternal
	}
	return "http_" + strconv.Itoa(status)
}
