package admin

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/server"
)

func newApp() *fiber.App {
	app := fiber.New(fiber.Config{ErrorHandler: server.ErrorHandler(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	Routes(app)
	return app
}

// The console and its files are served with their types under the strict
// policy: scripts and styles only from the origin, nothing inline.
func TestConsoleIsServed(t *testing.T) {
	app := newApp()
	for _, tc := range []struct{ name, path, ctype, contains string }{
		{"page", "/admin", "text/html; charset=utf-8", `<script src="/admin/assets/app.js" defer></script>`},
		{"script", "/admin/assets/app.js", "text/javascript; charset=utf-8", "function route()"},
		{"area script", "/admin/assets/reports.js", "text/javascript; charset=utf-8", "\"/admin/audit\""},
		{"style", "/admin/assets/app.css", "text/css; charset=utf-8", "@media"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := app.Test(httptest.NewRequest("GET", tc.path, nil))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != tc.ctype || !strings.Contains(string(body), tc.contains) {
				t.Errorf("GET %s: %d %q, want %s holding %q", tc.path, res.StatusCode, res.Header.Get("Content-Type"), tc.ctype, tc.contains)
			}
			csp := res.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self';", "style-src 'self';", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("GET %s: Content-Security-Policy %q lacks %q", tc.path, csp, want)
				}
			}
			if strings.Contains(csp, "unsafe") {
				t.Errorf("GET %s: Content-Security-Policy %q allows something unsafe", tc.path, csp)
			}
		})
	}
}

// Every script the page loads from /admin/assets is one of its files,
// served as JavaScript: the console split over several files loses none.
func TestEveryScriptIsServed(t *testing.T) {
	b, err := files.ReadFile("web/index.html")
	if err != nil {
		t.Fatal(err)
	}
	srcs := regexp.MustCompile(`<script src="(/admin/assets/[^"]+)" defer></script>`).FindAllStringSubmatch(string(b), -1)
	if len(srcs) < 2 {
		t.Fatalf("index.html loads %d console scripts", len(srcs))
	}
	app := newApp()
	for _, m := range srcs {
		res, err := app.Test(httptest.NewRequest("GET", m[1], nil))
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
			t.Errorf("GET %s: %d %q", m[1], res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
}

// The page carries no inline script or style and loads nothing from
// another origin, so the policy never has to be loosened for it.
func TestPageHasNothingInline(t *testing.T) {
	b, err := files.ReadFile("web/index.html")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, bad := range []string{"<script>", "<style", " style=", " onclick=", " onsubmit=", "http://", "https://", "//cdn"} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html holds %q", bad)
		}
	}
}

// Any other name under /admin/assets is a 404 problem document, also one
// that tries to climb out of the embedded folder.
func TestUnknownFileIsNotFound(t *testing.T) {
	app := newApp()
	for _, p := range []string{"/admin/assets/nope.js", "/admin/assets/..%2fadmin.go", "/admin/assets/..", "/admin/assets/admin.go"} {
		res, err := app.Test(httptest.NewRequest("GET", p, nil))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		}
		body, _ := io.ReadAll(res.Body)
		_ = json.Unmarshal(body, &doc)
		if res.StatusCode != 404 || res.Header.Get("Content-Type") != server.ContentTypeProblem || doc.Code != "not_found" || doc.Status != 404 {
			t.Errorf("GET %s: %d %q %s, want a 404 not_found problem", p, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	}
}
