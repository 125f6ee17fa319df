// Package storefronttest holds internal/storefront's tests through the whole application
// (shoptest), so storefront's own tests build only storefront and what it imports.
package storefronttest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// The page and its files, and the client the pages share, are served from
// the binary, outside /api/v1 and its rate limiter, under a strict content
// security policy; anything else under /assets is a 404 problem.
func TestPageIsServed(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{Config: func(c *config.Config) {
		c.RateLimit = config.RateLimit{Limit: 100, Window: time.Minute}
	}})
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", `<script src="/assets/app.js"`},
		{"/assets/app.js", "text/javascript; charset=utf-8", "Idempotency-Key"},
		{"/assets/app.css", "text/css; charset=utf-8", "@media"},
		{"/shared/client.js", "text/javascript; charset=utf-8", "function shopClient"}, // both pages' client, mounted by the app
	} {
		r := a.Do(t, http.MethodGet, tc.path, "", "")
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != tc.ctype || !strings.Contains(string(r.Body), tc.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", tc.path, r.Status, r.Header.Get("Content-Type"), tc.contains, strings.Contains(string(r.Body), tc.contains))
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
		if r.Header.Get("X-RateLimit-Limit") != "" {
			t.Errorf("GET %s is rate limited", tc.path)
		}
	}
	for _, p := range []string{"/assets/nope.js", "/assets/..%2fstorefront.go", "/assets/.."} {
		openapitest.WantProblem(t, a.Do(t, http.MethodGet, p, "", ""), http.StatusNotFound, "not_found")
	}
}

// The page is told the configured payment provider, so it asks for a
// card only with Stripe.
func TestPageIsToldThePaymentProvider(t *testing.T) {
	t.Parallel()
	for provider, edit := range map[string]func(*config.Config){
		"test": func(*config.Config) {},
		"stripe": func(c *config.Config) {
			c.PaymentProvider, c.StripeSecretKey, c.StripeWebhookSecret = "stripe", "sk_test_123", "whsec_123"
			c.StripeAPIURL = "http://127.0.0.1:1" // never called: nothing is paid here
		},
	} {
		a := shoptest.New(t, shoptest.Options{Config: edit})
		r := a.Do(t, http.MethodGet, "/", "", "")
		if want := `<meta name="shop-payment-provider" content="` + provider + `">`; r.Status != http.StatusOK || !strings.Contains(string(r.Body), want) {
			t.Errorf("GET / with provider %s: %d, no %s", provider, r.Status, want)
		}
	}
}
