package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
)

// ContentTypeProblem is the media type of RFC 9457 problem documents.
const ContentTypeProblem = "application/problem+json"

// HeaderRequestID carries the request id, echoed when the client sent a
// sound one (EnsureRequestID).
const HeaderRequestID = "X-Request-ID"

// problem is the RFC 9457 document. Extension members (code, errors,
// request_id and apperr.Error.Extra) sit beside the standard ones.
type problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail,omitempty"`
	Instance  string              `json:"instance,omitempty"`
	Code      string              `json:"code"`
	RequestID string              `json:"request_id,omitempty"`
	Errors    []apperr.FieldError `json:"errors,omitempty"`
}

// ErrorHandler returns the Fiber error handler: every error becomes a
// problem+json answer. Unknown errors are logged with the request id and
// answered 500 with no internals (Fiber's default would show err.Error()).
func ErrorHandler(log *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		e := asError(err)
		status := statusFor(e)
		rid := EnsureRequestID(c)
		switch {
		case e.Code == apperr.CodeUnavailable:
			log.Warn("store unavailable", "request_id", rid, "method", c.Method(), "path", c.Path(), "err", err)
		case status >= 500:
			log.Error("request failed", "request_id", rid, "method", c.Method(), "path", c.Path(), "err", err)
		}
		if status == http.StatusUnauthorized {
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="shop"`)
		}
		if e.RetryAfter > 0 {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
		}
		body, merr := marshalProblem(e, status, c.OriginalURL(), rid)
		if merr != nil {
			return merr
		}
		c.Set(fiber.HeaderContentType, ContentTypeProblem)
		return c.Status(status).Send(body)
	}
}

// asError turns any error into an *apperr.Error: ours as they are, Fiber's by
// status, everything else into an internal error.
func asError(err error) *apperr.Error {
	var e *apperr.Error
	if errors.As(err, &e) {
		return e
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		detail := fe.Message
		if fe.Code >= 500 {
			detail = http.StatusText(fe.Code)
		}
		return &apperr.Error{Code: codeForStatus(fe.Code), Detail: detail}
	}
	return &apperr.Error{Code: apperr.CodeInternal, Detail: "internal error"}
}

func marshalProblem(e *apperr.Error, status int, instance, rid string) ([]byte, error) {
	p := problem{
		Type:      "urn:shop:problem:" + e.Code,
		Title:     http.StatusText(status),
		Status:    status,
		Detail:    e.Detail,
		Instance:  instance,
		Code:      e.Code,
		RequestID: rid,
		Errors:    e.Fields,
	}
	if e.Code == apperr.CodeInvalidRequest && p.Errors == nil {
		p.Errors = []apperr.FieldError{}
	}
	if len(e.Extra) == 0 {
		return json.Marshal(p)
	}
	// Merge extension members; the standard members win a name clash.
	base, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, len(e.Extra)+8)
	for k, v := range e.Extra {
		m[k] = v
	}
	var std map[string]any
	if err := json.Unmarshal(base, &std); err != nil {
		return nil, err
	}
	for k, v := range std {
		m[k] = v
	}
	return json.Marshal(m)
}
