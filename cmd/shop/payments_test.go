package main

import (
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

// `shop payments reconcile` needs the stripe provider, and on a shop with
// nothing to repair prints nothing and exits 0 (stripe-mock's list holds
// one intent, of no order of this shop).
func TestPaymentsReconcileCommand(t *testing.T) {
	t.Parallel()
	_, env, shop := onTestStores(t)
	if out, err := shop("payments", "reconcile"); err == nil || !strings.Contains(out, "SHOP_PAYMENT_PROVIDER") {
		t.Fatalf("reconcile with the test provider: %v %s", err, out)
	}
	env["SHOP_PAYMENT_PROVIDER"], env["SHOP_STRIPE_SECRET_KEY"] = "stripe", "sk_test_123"
	if out, err := shop("payments", "reconcile"); err == nil || !strings.Contains(out, "SHOP_STRIPE_WEBHOOK_SECRET") {
		t.Fatalf("reconcile without the webhook secret: %v %s", err, out)
	}
	env["SHOP_STRIPE_WEBHOOK_SECRET"], env["SHOP_STRIPE_API_URL"] = "whsec_1", testenv.StripeMock(t)
	if out, err := shop("payments", "reconcile", "--since", "0s"); err == nil || !strings.Contains(out, "--since") {
		t.Fatalf("reconcile --since 0s: %v %s", err, out)
	}
	if out, err := shop("payments", "reconcile", "--since", "1h"); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("reconcile of a shop with nothing to repair: %v %q", err, out)
	}
}
