// Package storefront serves the shop's web page: plain HTML, CSS and
// JavaScript embedded in the binary (no build step, no separate server),
// mounted at the top level, outside /api/v1, so the page's own files are
// neither rate limited nor part of the API.
//
// The reasoning behind it is in docs/design/storefront.md.
package storefront

import (
	"embed"
	"mime"
	"path"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
)

//go:embed web
var files embed.FS

// policy lets the page load only its own files and talk only to its own
// origin.
const policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

var errNoFile = apperr.NewError(apperr.CodeNotFound, "no such file")

// Routes registers the page (GET /) and its files (GET /assets/{file}) on
// the app's root router.
func Routes(r fiber.Router) {
	r.Get("/", func(c *fiber.Ctx) error { return serve(c, "index.html") })
	r.Get("/assets/:file", func(c *fiber.Ctx) error { return serve(c, c.Params("file")) })
}

// serve answers one embedded file. The files are small and change with
// the binary, so they are revalidated on every load (no-cache) rather
// than versioned.
func serve(c *fiber.Ctx, name string) error {
	if name != path.Base(name) || name == "." {
		return errNoFile
	}
	b, err := files.ReadFile("web/" + name)
	if err != nil {
		return errNoFile
	}
	c.Set(fiber.HeaderContentType, contentType(name))
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("Content-Security-Policy", policy)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set("Referrer-Policy", "no-referrer")
	return c.Send(b)
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}
