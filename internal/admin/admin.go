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
	"io/fs"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/webpage"
)

//go:embed web
var files embed.FS

// Routes registers the console (GET /admin) and its files
// (GET /admin/assets/{file}) on the app's root router.
func Routes(r fiber.Router) {
	web, _ := fs.Sub(files, "web") // "web" is embedded above
	serve := func(c *fiber.Ctx, name string) error {
		b, err := webpage.Read(web, name)
		if err != nil {
			return err
		}
		return webpage.Send(c, name, b)
	}
	r.Get("/admin", func(c *fiber.Ctx) error { return serve(c, "index.html") })
	r.Get("/admin/assets/:file", func(c *fiber.Ctx) error { return serve(c, c.Params("file")) })
}
