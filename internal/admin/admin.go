// Package admin serves the admin console: plain HTML, CSS and JavaScript
// embedded in the binary (no build step, no separate server), mounted at
// /admin outside /api/v1. The page is a client of the public API only:
// it owns no route of its own beyond its files, and every action it offers
// is an admin endpoint any other client could call.
//
// The reasoning behind it is in docs/design/admin.md.
package admin

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
// origin; it is the storefront's.
const policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

var errNoFile = apperr.NewError(apperr.CodeNotFound, "no such file")

// Routes registers the console (GET /admin) and its files
// (GET /admin/assets/{file}) on the app's root router.
func Routes(r fiber.Router) {
	r.Get("/admin", func(c *fiber.Ctx) error { return serve(c, "index.html") })
	r.Get("/admin/assets/:file", func(c *fiber.Ctx) error { return serve(c, c.Params("file")) })
}

// serve answers one embedded file, or a 404 problem for any other name.
// The files change with the binary, so they are revalidated on every load
// (no-cache) rather than versioned.
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
