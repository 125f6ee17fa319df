package storefront

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// The page is told the payment provider in its meta element, on / and on
// /assets/index.html alike; the embedded file carries the placeholder
// (Index panics without it, at start-up).
func TestPageIsToldTheProvider(t *testing.T) {
	for _, provider := range []string{"test", "stripe", `"><script>`} {
		app := fiber.New()
		Routes(app, provider)
		want := `<meta name="shop-payment-provider" content="` + strings.NewReplacer(`"`, "&#34;", "<", "&lt;", ">", "&gt;").Replace(provider) + `">`
		for _, path := range []string{"/", "/assets/index.html"} {
			res, err := app.Test(httptest.NewRequest("GET", path, nil))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 || !strings.Contains(string(body), want) || strings.Count(string(body), "shop-payment-provider") != 1 {
				t.Errorf("GET %s with provider %q: %d, want one %s in\n%s", path, provider, res.StatusCode, want, body)
			}
		}
	}
}

// The icon is served at /favicon.ico (browsers ask for it on every page)
// as an SVG, under the page's policy.
func TestFavicon(t *testing.T) {
	app := fiber.New()
	Routes(app, "test")
	res, err := app.Test(httptest.NewRequest("GET", "/favicon.ico", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/svg+xml" ||
		!strings.HasPrefix(string(body), "<svg") || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET /favicon.ico: %d %q %q", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
}
