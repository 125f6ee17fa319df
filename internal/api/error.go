// Package api holds what every HTTP handler of the shop shares: the one
// application error type, whose stable codes map to HTTP statuses in a single
// table; the RFC 9457 problem+json error handler that writes it; and strict
// decoding of JSON request bodies.
//
// Domain packages declare their sentinel errors as *Error values
// (`var ErrSoldOut = api.NewError(api.CodeOutOfStock, "...")`) and wrap them
// with %w; the error handler finds them with errors.As. Anything that is not
// an *Error is an internal error: logged with the request id and answered
// 500 without internals.
package api

import (
	"net/http"
	"strconv"
)

// Stable machine-readable codes of the contract (API.md) and the additions.
const (
	CodeInvalidRequest     = "invalid_request"
	CodeUnauthorized       = "unauthorized"
	CodeInvalidCredentials = "invalid_credentials"
	CodeInvalidToken       = "invalid_token"
	CodeForbidden          = "forbidden"
	CodeNotFound           = "not_found"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeEmailTaken         = "email_taken"
	CodeSKUTaken           = "sku_taken"
	CodeOutOfStock         = "out_of_stock"
	CodeLimitExceeded      = "limit_exceeded"
	CodeSaleNotActive      = "sale_not_active"
	CodeCartEmpty          = "cart_empty"
	CodeIdempotencyReused  = "idempotency_key_reused"
	CodePaymentDeclined    = "payment_declined"
	CodeOrderPending       = "order_pending"
	CodeOrderNotPayable    = "order_not_payable"
	CodeNotCancellable     = "order_not_cancellable"
	CodeConflict           = "conflict"
	CodePayloadTooLarge    = "payload_too_large"
	CodeUnsupportedMedia   = "unsupported_media_type"
	CodeHeadersTooLarge    = "headers_too_large"
	CodeRequestTimeout     = "request_timeout"
	CodeRateLimited        = "rate_limited"
	CodeInternal           = "internal"
	CodeUnavailable        = "unavailable"
)

// statusOf is the single table from code to HTTP status.
var statusOf = map[string]int{
	CodeInvalidRequest:     http.StatusBadRequest,
	CodeUnauthorized:       http.StatusUnauthorized,
	CodeInvalidCredentials: http.StatusUnauthorized,
	CodeInvalidToken:       http.StatusUnauthorized,
	CodeForbidden:          http.StatusForbidden,
	CodeNotFound:           http.StatusNotFound,
	CodeMethodNotAllowed:   http.StatusMethodNotAllowed,
	CodeEmailTaken:         http.StatusConflict,
	CodeSKUTaken:           http.StatusConflict,
	CodeOutOfStock:         http.StatusConflict,
	CodeLimitExceeded:      http.StatusConflict,
	CodeSaleNotActive:      http.StatusConflict,
	CodeCartEmpty:          http.StatusConflict,
	CodeIdempotencyReused:  http.StatusUnprocessableEntity,
	CodePaymentDeclined:    http.StatusPaymentRequired,
	CodeOrderPending:       http.StatusConflict,
	CodeOrderNotPayable:    http.StatusConflict,
	CodeNotCancellable:     http.StatusConflict,
	CodeConflict:           http.StatusConflict,
	CodePayloadTooLarge:    http.StatusRequestEntityTooLarge,
	CodeUnsupportedMedia:   http.StatusUnsupportedMediaType,
	CodeHeadersTooLarge:    http.StatusRequestHeaderFieldsTooLarge,
	CodeRequestTimeout:     http.StatusRequestTimeout,
	CodeRateLimited:        http.StatusTooManyRequests,
	CodeInternal:           http.StatusInternalServerError,
	CodeUnavailable:        http.StatusServiceUnavailable,
}

// codeOf is the reverse table, for errors that carry only a status (Fiber's).
var codeOf = map[int]string{
	http.StatusBadRequest:                  CodeInvalidRequest,
	http.StatusUnauthorized:                CodeUnauthorized,
	http.StatusForbidden:                   CodeForbidden,
	http.StatusNotFound:                    CodeNotFound,
	http.StatusMethodNotAllowed:            CodeMethodNotAllowed,
	http.StatusConflict:                    CodeConflict,
	http.StatusRequestEntityTooLarge:       CodePayloadTooLarge,
	http.StatusUnsupportedMediaType:        CodeUnsupportedMedia,
	http.StatusRequestHeaderFieldsTooLarge: CodeHeadersTooLarge,
	http.StatusRequestTimeout:              CodeRequestTimeout,
	http.StatusTooManyRequests:             CodeRateLimited,
	http.StatusServiceUnavailable:          CodeUnavailable,
}

// Error is an application error that the HTTP layer answers as a problem
// document. Create it with NewError, Invalid or Unavailable.
type Error struct {
	Code   string
	Detail string
	// Fields lists what is wrong with the request body (invalid_request).
	Fields []FieldError
	// Extra holds extension members such as "skus" for out_of_stock.
	Extra map[string]any
	// RetryAfter, in whole seconds, is sent as the Retry-After header.
	RetryAfter int
}

// FieldError names one invalid field of a request and says why.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// NewError returns an error with the given code and human-readable detail.
func NewError(code, detail string) *Error { return &Error{Code: code, Detail: detail} }

// Invalid returns an invalid_request error listing the bad fields.
func Invalid(fields ...FieldError) *Error {
	return &Error{Code: CodeInvalidRequest, Detail: "the request is not valid", Fields: fields}
}

// Unavailable returns a 503 error: a store the request needs is unreachable.
// Clients may retry after a second.
func Unavailable(detail string) *Error {
	return &Error{Code: CodeUnavailable, Detail: detail, RetryAfter: 1}
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Code
	}
	return e.Code + ": " + e.Detail
}

// Status is the HTTP status for the error's code (500 for an unknown code).
func (e *Error) Status() int {
	if s, ok := statusOf[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Is makes a copy made by With (an out_of_stock naming its SKUs) still "be"
// the sentinel it came from: same code and detail. Two sentinels that share
// a code but say different things stay distinct.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Detail == e.Detail
}

// With returns a copy of e carrying one more extension member.
func (e *Error) With(name string, value any) *Error {
	c := *e
	c.Extra = make(map[string]any, len(e.Extra)+1)
	for k, v := range e.Extra {
		c.Extra[k] = v
	}
	c.Extra[name] = value
	return &c
}

// codeForStatus names a status that came without a code.
func codeForStatus(status int) string {
	if c, ok := codeOf[status]; ok {
		return c
	}
	if status >= 500 {
		return CodeInternal
	}
	return "http_" + strconv.Itoa(status)
}
