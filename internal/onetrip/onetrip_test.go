package onetrip

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/ratelimit"
	"github.com/shop-oss/shop/internal/room"
	"github.com/shop-oss/shop/internal/testenv"
)

// Each script compiles in Redis, starts with its one shebang, and carries
// every part whole, in trip.lua's order. The whole-app tests of the one
// trip are in internal/shop (onetrip_test.go, oneread_test.go).
func TestScriptsCompileWithEveryPart(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	for name, tc := range map[string]struct{ script, step string }{
		"purchase":     {Purchase, order.ReserveLua()},
		"product read": {ProductRead, inventory.ProductReadLua()},
	} {
		if err := r.Client.ScriptLoad(context.Background(), tc.script).Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Count(tc.script, "#!") != 1 || !strings.HasPrefix(tc.script, "#!lua\n") {
			t.Fatalf("%s: want one leading shebang", name)
		}
		if strings.Contains(tc.script, "{{") {
			t.Fatalf("%s: a slot was left unfilled", name)
		}
		last := -1
		for _, part := range []string{ratelimit.WindowLua(), auth.SessionCheckLua(), auth.AdmitLua(), dropShebang(tc.step)} {
			i := strings.Index(tc.script, dropShebang(part))
			if i <= last {
				t.Fatalf("%s: a part is missing or out of order (at %d after %d)", name, i, last)
			}
			last = i
		}
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method, path, auth string
		purchase, read     bool
	}{
		{"POST", "/api/v1/products/p1/purchase", "", true, false},
		{"POST", "/api/v1/cart/checkout", "Bearer x", true, false},
		{"POST", "/api/v1/products/p1/purchase/", "", false, false},
		{"POST", "/api/v1/products/a/b/purchase", "", false, false},
		{"POST", "/api/v1/products//purchase", "", false, false},
		{"GET", "/api/v1/products/p1/purchase", "", false, false},
		{"POST", "/api/v1/cart/items", "", false, false},
		{"GET", "/api/v1/products/p1", "", false, true},
		{"GET", "/api/v1/products/p1", "Bearer x", false, false},
		{"GET", "/api/v1/products/", "", false, false},
		{"GET", "/api/v1/products/p1/stock", "", false, false},
		{"HEAD", "/api/v1/products/p1", "", false, false},
	}
	for _, tc := range cases {
		app := fiber.New()
		var purchase, read bool
		app.Use(func(c *fiber.Ctx) error {
			purchase, read = PurchaseRoute(c), ProductReadRoute(c)
			return nil
		})
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		if _, err := app.Test(req); err != nil {
			t.Fatal(err)
		}
		if purchase != tc.purchase || read != tc.read {
			t.Errorf("%s %s (auth %q): purchase %v read %v, want %v %v", tc.method, tc.path, tc.auth, purchase, read, tc.purchase, tc.read)
		}
	}
}

func TestDeferrals(t *testing.T) {
	t.Parallel()
	if d := Deferrals(false); len(d) != 2 || d[0].Name != order.OneTrip || d[0].Script != Purchase ||
		d[1].Name != room.OneTrip || d[1].Script != Queue {
		t.Fatalf("Deferrals(false) = %+v", d)
	}
	if d := Deferrals(true); len(d) != 3 || d[2].Name != inventory.OneTripRead || d[2].Script != ProductRead {
		t.Fatalf("Deferrals(true) = %+v", d)
	}
}
