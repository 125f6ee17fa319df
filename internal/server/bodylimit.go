package server

import (
	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
)

// fiberBodyLimit is the limit fasthttp enforces while reading: the larger
// of the two, since it cannot tell the routes apart.
func fiberBodyLimit(d Deps) int {
	if d.Upload != nil && d.UploadLimit > d.BodyLimit {
		return d.UploadLimit
	}
	return d.BodyLimit
}

// bodyLimit answers 413 to a body over BodyLimit that is not an upload:
// fasthttp has only read it because an upload may be that large.
func bodyLimit(d Deps) fiber.Handler {
	tooLarge := apperr.NewError(apperr.CodePayloadTooLarge, "the request body is too large")
	return func(c *fiber.Ctx) error {
		if len(c.Request().Body()) > d.BodyLimit && !d.Upload(c.Method(), c.Path()) {
			return tooLarge
		}
		return c.Next()
	}
}
