// Package apperr holds the shop's one application error type and its stable
// codes (docs/api.md); internal/server maps codes to HTTP statuses and writes them
// as problem+json. It imports no net/http.
//
// Sentinels are made one way, by who sees them:
//   - an error a client sees is an *Error with a code, declared where it is
//     returned: var ErrSoldOut = apperr.NewError(apperr.CodeOutOfStock, "...");
//   - an error only our code sees is errors.New("pkg: ..."), named ErrX;
//   - wrap either with the operation, fmt.Errorf("reserve %s: %w", sku, err).
//
// Anything that is not an *Error is answered 500 without internals.
package apperr

// Stable machine-readable codes of the contract (docs/api.md) and the additions.
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
	CodePassRequired       = "pass_required"
	CodeChallengeFailed    = "challenge_failed"
	CodeInvalidSignature   = "invalid_signature"
	CodeCartEmpty          = "cart_empty"
	CodeIdempotencyReused  = "idempotency_key_reused"
	CodePaymentDeclined    = "payment_declined"
	CodeOrderPending       = "order_pending"
	CodeOrderNotPayable    = "order_not_payable"
	CodeNotCancellable     = "order_not_cancellable"
	CodeNotRefundable      = "order_not_refundable"
	CodeAlreadyEntered     = "already_entered"
	CodeDrawClosed         = "draw_closed"
	CodeConflict           = "conflict"
	CodePayloadTooLarge    = "payload_too_large"
	CodeUnsupportedMedia   = "unsupported_media_type"
	CodeHeadersTooLarge    = "headers_too_large"
	CodeRequestTimeout     = "request_timeout"
	CodeRateLimited        = "rate_limited"
	CodeInternal           = "internal"
	CodeUnavailable        = "unavailable"
)

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
