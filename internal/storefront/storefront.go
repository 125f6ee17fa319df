// Package storefront serves the shop's web page: plain HTML, CSS and
// JavaScript embedded in the binary (no build step, no separate server),
// mounted at the top level, outside /api/v1, so the page's own files are
// neither rate limited nor part of the API.
//
// The reasoning behind it is in docs/design/storefront.md.
package storefront

import (
	"bytes"
	"embed"
	"html"
	"io/fs"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/webpage"
)

//go:embed web
var files embed.FS

// web is the page's folder, as webpage reads it.
var web, _ = fs.Sub(files, "web") // "web" is embedded above

// providerMeta is index.html's placeholder telling the page the payment
// provider (SHOP_PAYMENT_PROVIDER): the page asks for a card only with
// one that takes cards. A meta element, not an inline script, so the
// page's policy (webpage.Policy) needs no exception.
const providerMeta = `<meta name="shop-payment-provider" content="test">`

// Routes registers the page (GET /), its icon (GET /favicon.ico, an SVG)
// and its files (GET /assets/{file}) on the app's root router; provider is
// the payment provider's name, which the page is told in its
// shop-payment-provider meta element.
func Routes(r fiber.Router, provider string) {
	index := Index(provider)
	r.Get("/", func(c *fiber.Ctx) error { return serve(c, "index.html", index) })
	r.Get("/favicon.ico", func(c *fiber.Ctx) error { return serve(c, "favicon.svg", index) })
	r.Get("/assets/:file", func(c *fiber.Ctx) error { return serve(c, c.Params("file"), index) })
}

// Index answers index.html telling the page payment provider provider.
func Index(provider string) []byte {
	b, err := files.ReadFile("web/index.html")
	if err != nil || !bytes.Contains(b, []byte(providerMeta)) {
		panic("storefront: index.html lacks " + providerMeta)
	}
	meta := `<meta name="shop-payment-provider" content="` + html.EscapeString(provider) + `">`
	return bytes.Replace(b, []byte(providerMeta), []byte(meta), 1)
}

// serve answers one embedded file (index.html as given).
func serve(c *fiber.Ctx, name string, index []byte) error {
	b, err := webpage.Read(web, name)
	if err != nil {
		return err
	}
	if name == "index.html" {
		b = index
	}
	return webpage.Send(c, name, b)
}
