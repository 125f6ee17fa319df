package pickup

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/openapitest"
)

// listAll pages through the store list, limit at a time, and returns the
// ids in the order served.
func (f *fixture) listAll(t *testing.T, limit string) []string {
	t.Helper()
	var got []string
	cursor := ""
	for range 100 {
		q := url.Values{"limit": {limit}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores?"+q.Encode(), "", "")
		var p Page
		r.Decode(t, http.StatusOK, &p)
		for _, s := range p.Items {
			got = append(got, s.ID)
		}
		if p.NextCursor == nil {
			return got
		}
		cursor = *p.NextCursor
	}
	t.Fatal("the list does not end")
	return nil
}

func TestStoreListIsByIDBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if r := openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores", "", ""); string(r.Body) != `{"items":[],"next_cursor":null}` {
		t.Fatalf("no stores: %d %s", r.Status, r.Body)
	}
	ids := []string{"b", "B", "a-1", "a.1", "a_1", "a1", "Z", "0", "9z", "zz"}
	for _, id := range ids {
		f.put(t, Store{ID: id, Name: "Store " + id, Lng: 2, Lat: 48})
	}
	want := slices.Clone(ids)
	slices.Sort(want) // Go compares strings bytewise
	for _, limit := range []string{"1", "3", "10", "500"} {
		if got := f.listAll(t, limit); !slices.Equal(got, want) {
			t.Errorf("limit %s: %v, want %v", limit, got, want)
		}
	}
	var p Page
	openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores", "", "").Decode(t, http.StatusOK, &p)
	if len(p.Items) != len(ids) || p.Items[0] != (Store{ID: "0", Name: "Store 0", Lng: 2, Lat: 48}) {
		t.Fatalf("default page: %+v", p)
	}
}

func TestStoreListBadQuery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.put(t, paris[0])
	enc := base64.RawURLEncoding.EncodeToString
	for _, tc := range []struct {
		name, query string
		fields      []string
	}{
		{"limit_zero", "limit=0", []string{"limit"}},
		{"limit_over", "limit=501", []string{"limit"}},
		{"limit_text", "limit=ten", []string{"limit"}},
		{"limit_negative", "limit=-1", []string{"limit"}},
		{"cursor_garbage", "cursor=%21%21", []string{"cursor"}},
		{"cursor_padded", "cursor=" + enc([]byte("louvre")) + "%3D%3D", []string{"cursor"}},
		{"cursor_bad_id", "cursor=" + enc([]byte("..")), []string{"cursor"}},
		{"cursor_long_id", "cursor=" + enc([]byte(strings.Repeat("a", 65))), []string{"cursor"}},
		{"both", "limit=0&cursor=x%2F", []string{"limit", "cursor"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores?"+tc.query, "", "")
			openapitest.WantInvalid(t, r, tc.fields)
		})
	}
}
