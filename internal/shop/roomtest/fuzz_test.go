package roomtest

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// FuzzJoinBody sends arbitrary bodies and SKUs to POST .../queue: never a
// 5xx, every 4xx a problem document, and a join behind a challenge that
// is not answered makes no entry.
func FuzzJoinBody(f *testing.F) {
	x := newFixture(f)
	later := stamp(nextSecond(time.Hour))
	x.seed(f, "gate", `{"quantity":5,"starts_at":"`+later+`","waiting_room":{"admit_per_second":5,"challenge_bits":8}}`)
	x.seed(f, "open", `{"quantity":5,"waiting_room":{"admit_per_second":5}}`)
	x.seed(f, "plain", `{"quantity":5}`)
	_, tok := x.shopper(f)
	for _, s := range []struct{ sku, body string }{
		{"gate", ``},
		{"gate", `{}`},
		{"gate", `{"challenge":"00112233445566778899aabbccddeeff","nonce":"1"}`},
		{"gate", `{"challenge":null,"nonce":null}`},
		{"gate", `{"challenge":1,"nonce":2}`},
		{"gate", `{"challenge":"x","nonce":"` + string(make([]byte, 70)) + `"}`},
		{"gate", `{"nonce":"\u0000"}`},
		{"gate", "{\"challenge\":\"\xff\"}"},
		{"gate", `[]`},
		{"gate", `{"challenge":"a"}{"nonce":"b"}`},
		{"open", `{"challenge":"../../x","nonce":"y"}`},
		{"plain", `{}`},
		{"nope", `{}`},
		{"..", ``},
	} {
		f.Add(s.sku, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, sku string, body []byte) {
		path := "/api/v1/products/" + url.PathEscape(sku) + "/queue"
		if len(path) > shoptest.MaxFuzzPath {
			return
		}
		r := x.Do(t, http.MethodPost, path, tok, string(body))
		openapitest.WantSound(t, r)
		if sku == "gate" && r.Status < 300 {
			t.Fatalf("joined a challenged room without a challenge: %d %s", r.Status, r.Body)
		}
		if wr := x.report(t, "gate").WaitingRoom; wr == nil || wr.Waiting != 0 {
			t.Fatalf("the challenged room: %+v", wr)
		}
	})
}
