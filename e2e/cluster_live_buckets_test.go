package e2e

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/openapitest"
)

// A round of 3 stock buckets on the 3-master cluster, bought out by
// shoppers homed in buckets 1 and 2 only: each bucket publishes on a
// channel of its own (in its own slot), and the live stream, which
// listens to every bucket once it knows the round has several, follows
// the round's sum down to the sell-out. Listening to bucket 0 alone it
// saw no event after the first.
func TestClusterStreamFollowsABucketedRound(t *testing.T) {
	t.Parallel()
	e, _ := clusterEnv(t, 3)
	s := newShop(t, e)
	const units, buckets = 6, 3
	s.product(t, "split", 100, map[string]any{"quantity": units, "per_user_limit": 1, "buckets": buckets})
	var buyers []string
	for _, tok := range s.shoppers(t, 24, "split") {
		if inventory.HomeBucket(tokenSubject(t, tok), buckets) != 0 {
			buyers = append(buyers, tok)
		}
	}
	if len(buyers) < units {
		t.Fatalf("%d shoppers homed outside bucket 0, want %d", len(buyers), units)
	}
	live := stream(t, s.URL, "split")
	if ev, ok := live.Next(10 * time.Second); !ok || ev.Available != units {
		t.Fatalf("first event %+v (%v), want %d", ev, ok, units)
	}
	for i, tok := range buyers[:units] {
		if o := s.purchase(t, tok, "split", 1, "k"); o.status != 202 {
			t.Fatalf("purchase %d: %d %s", i+1, o.status, o.code)
		}
		want := int64(units - i - 1)
		ev, ok := live.Until(10*time.Second, func(ev openapitest.StockEvent) bool { return ev.Available == want })
		if !ok {
			t.Fatalf("purchase %d was not streamed as %d of the round's units", i+1, want)
		}
		if want == 0 && ev.Sale != "sold_out" {
			t.Fatalf("the last unit's event %+v, want sold_out", ev)
		}
	}
}

// tokenSubject is the user id an access token names (its JWT's sub).
func tokenSubject(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Sub string `json:"sub"`
	}
	if err != nil || json.Unmarshal(raw, &claims) != nil || claims.Sub == "" {
		t.Fatalf("token claims %q: %v", raw, err)
	}
	return claims.Sub
}
