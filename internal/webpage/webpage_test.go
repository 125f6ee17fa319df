package webpage_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/admin"
	"github.com/shop-oss/shop/internal/storefront"
	"github.com/shop-oss/shop/internal/webpage"
)

// get answers path's body and its Content-Type and policy headers.
func get(t *testing.T, app *fiber.App, path string) (body, ctype, policy string) {
	t.Helper()
	res, err := app.Test(httptest.NewRequest("GET", path, nil))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	return string(b), res.Header.Get("Content-Type"), res.Header.Get("Content-Security-Policy")
}

// Both pages load the shared client, before their own script (deferred
// scripts run in order), and it is served once, as a script under the
// pages' policy.
func TestPagesLoadTheSharedClient(t *testing.T) {
	app := fiber.New()
	storefront.Routes(app, "test")
	admin.Routes(app)
	webpage.Routes(app)

	js, ctype, policy := get(t, app, webpage.ClientPath)
	if ctype != "text/javascript; charset=utf-8" || policy != webpage.Policy || !strings.Contains(js, "function shopClient(") {
		t.Errorf("GET %s: %s under %q, want the client script under the pages' policy", webpage.ClientPath, ctype, policy)
	}
	client := `<script src="` + webpage.ClientPath + `" defer></script>`
	for page, own := range map[string]string{"/": "/assets/app.js", "/admin": "/admin/assets/app.js"} {
		html, _, _ := get(t, app, page)
		at, ownAt := strings.Index(html, client), strings.Index(html, `<script src="`+own+`" defer></script>`)
		if at < 0 || ownAt < at {
			t.Errorf("GET %s: want %s before its %s", page, client, own)
		}
	}
}
