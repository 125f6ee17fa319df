package server

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
)

// maxRequestIDLen bounds a client's X-Request-ID: it is copied into every
// log line and problem document of the request.
const maxRequestIDLen = 128

// RequestID returns the middleware that gives every request its
// X-Request-ID (see EnsureRequestID). Fiber's requestid middleware echoes
// whatever the client sends, NUL bytes and kilobytes included.
func RequestID() fiber.Handler {
	return func(c *fiber.Ctx) error {
		EnsureRequestID(c)
		return c.Next()
	}
}

// EnsureRequestID returns the request's id, setting the X-Request-ID
// response header first if it is not set yet: the client's value when it is
// 1–128 visible ASCII characters, else a fresh UUID. The error handler calls
// it too, because the HTTP layer's own 400/413/431 answers are made before
// any middleware runs.
func EnsureRequestID(c *fiber.Ctx) string {
	if rid := c.GetRespHeader(HeaderRequestID); rid != "" {
		return strings.Clone(rid)
	}
	rid := c.Get(HeaderRequestID)
	if validRequestID(rid) {
		rid = strings.Clone(rid) // c.Get aliases the request buffer, reused after the request
	} else {
		rid = uuid.NewString()
	}
	c.Set(HeaderRequestID, rid)
	return rid
}

// validRequestID accepts 1–128 visible ASCII characters (VCHAR, RFC 5234):
// nothing a log line, a header or a terminal could misread.
func validRequestID(s string) bool {
	if s == "" || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
