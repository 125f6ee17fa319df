// Package webpage serves the files of the pages embedded in the binary
// (the storefront, the admin console) the one way both need: under a
// strict Content-Security-Policy that lets a page load only its own files
// and talk only to its own origin, revalidated on every load. It owns the
// client of the API both pages load (client.js, at ClientPath).
package webpage

import (
	_ "embed"
	"io/fs"
	"mime"
	"path"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
)

// ClientPath is where both pages load the client they share.
const ClientPath = "/shared/client.js"

//go:embed client.js
var client []byte

// Routes registers the shared client (GET ClientPath) on the app's root
// router.
func Routes(r fiber.Router) {
	r.Get(ClientPath, func(c *fiber.Ctx) error { return Send(c, "client.js", client) })
}

// Policy lets a page load only its own files and talk only to its own
// origin: no inline script or style, nothing from elsewhere.
const Policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

var errNoFile = apperr.NewError(apperr.CodeNotFound, "no such file")

// Read reads the file name of files: a 404 problem for any name that is
// not one file of the folder (a path, "." or a missing file).
func Read(files fs.FS, name string) ([]byte, error) {
	if name != path.Base(name) || name == "." {
		return nil, errNoFile
	}
	b, err := fs.ReadFile(files, name)
	if err != nil {
		return nil, errNoFile
	}
	return b, nil
}

// Send answers b as the file name. The files change with the binary, so
// they are revalidated on every load (no-cache) rather than versioned.
func Send(c *fiber.Ctx, name string, b []byte) error {
	c.Set(fiber.HeaderContentType, contentType(name))
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("Content-Security-Policy", Policy)
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
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}
