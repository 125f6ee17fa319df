package catalogtest

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// listAll follows next_cursor from the first page to the last and returns
// the skus in order and the number of pages.
func (in *instance) listAll(t *testing.T, query url.Values) ([]string, int) {
	t.Helper()
	var skus []string
	pages := 0
	for {
		pages++
		r := in.do(t, http.MethodGet, "/api/v1/products?"+query.Encode(), "")
		if r.status != http.StatusOK {
			t.Fatalf("list %s: %d %s", query.Encode(), r.status, r.body)
		}
		p := r.page(t)
		for _, item := range p.Items {
			skus = append(skus, item.SKU)
		}
		if p.NextCursor == nil {
			return skus, pages
		}
		if pages > 50 {
			t.Fatal("pagination does not end")
		}
		query.Set("cursor", *p.NextCursor)
	}
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	var all, shoes []string
	for i := range 25 {
		category := "hats"
		if i%3 == 0 {
			category = "shoes"
		}
		// Mixed case and digits: the order must be bytewise, whatever
		// the database's locale.
		sku := fmt.Sprintf("%c-%02d", "aBcD"[i%4], i)
		in.create(t, sku, category, int64(i))
		all = append(all, sku)
		if category == "shoes" {
			shoes = append(shoes, sku)
		}
	}
	slices.Sort(all)
	slices.Sort(shoes)
	tests := []struct {
		name  string
		query url.Values
		want  []string
		pages int
	}{
		{"limit_10", url.Values{"limit": {"10"}}, all, 3},
		{"default_limit_20", url.Values{}, all, 2},
		{"exact_fit", url.Values{"limit": {"25"}}, all, 1},
		{"max_limit", url.Values{"limit": {"100"}}, all, 1},
		{"limit_1", url.Values{"limit": {"1"}}, all, 25},
		{"category", url.Values{"category": {"shoes"}, "limit": {"4"}}, shoes, 3},
		{"empty_category", url.Values{"category": {"socks"}}, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, pages := in.listAll(t, tc.query)
			if !slices.Equal(got, tc.want) || pages != tc.pages {
				t.Errorf("got %v in %d pages, want %v in %d", got, pages, tc.want, tc.pages)
			}
		})
	}
	r := in.do(t, http.MethodGet, "/api/v1/products?category=socks", "")
	if string(r.body) != `{"items":[],"next_cursor":null}` {
		t.Errorf("empty listing = %s", r.body)
	}
}

func TestListRejectsBadParameters(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	tests := []struct {
		name   string
		query  string
		fields []string
	}{
		{"limit_zero", "limit=0", []string{"limit"}},
		{"limit_negative", "limit=-1", []string{"limit"}},
		{"limit_over_max", "limit=101", []string{"limit"}},
		{"limit_not_integer", "limit=ten", []string{"limit"}},
		{"limit_fraction", "limit=1.5", []string{"limit"}},
		{"limit_huge", "limit=99999999999999999999", []string{"limit"}},
		{"cursor_not_base64", "cursor=%25%25", []string{"cursor"}},
		{"cursor_not_a_sku", "cursor=" + url.QueryEscape("Pz8_"), []string{"cursor"}},
		{"cursor_dotdot", "cursor=" + base64.RawURLEncoding.EncodeToString([]byte("..")), []string{"cursor"}},
		{"cursor_padded", "cursor=" + url.QueryEscape(base64.URLEncoding.EncodeToString([]byte("a"))), []string{"cursor"}},
		{"cursor_line_break", "cursor=" + url.QueryEscape("YW\nJj"), []string{"cursor"}},
		{"cursor_trailing_bits", "cursor=YR", []string{"cursor"}},
		{"cursor_std_alphabet", "cursor=" + url.QueryEscape(base64.RawStdEncoding.EncodeToString([]byte("a.b?"))), []string{"cursor"}},
		{"cursor_too_long", "cursor=" + base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("a", 65))), []string{"cursor"}},
		{"cursor_empty_sku", "cursor=%00", []string{"cursor"}},
		{"limit_empty_sign", "limit=+", []string{"limit"}},
		{"limit_plus_is_a_space", "limit=+5", []string{"limit"}},
		{"limit_leading_space", "limit=%205", []string{"limit"}},
		{"limit_hex", "limit=0x10", []string{"limit"}},
		{"limit_exponent", "limit=1e2", []string{"limit"}},
		{"limit_nul", "limit=5%00", []string{"limit"}},
		{"category_dot", "category=.", []string{"category"}},
		{"category_dotdot", "category=..", []string{"category"}},
		{"category_leading_dash", "category=-c", []string{"category"}},
		{"category_nul", "category=c%00", []string{"category"}},
		{"category_unicode", "category=%C3%A9t%C3%A9", []string{"category"}},
		{"category_invalid_utf8", "category=%FF", []string{"category"}},
		{"category_bad", "category=a%20b", []string{"category"}},
		{"category_too_long", "category=" + strings.Repeat("c", 65), []string{"category"}},
		{"all_bad", "limit=x&cursor=!!&category=*", []string{"limit", "cursor", "category"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := in.do(t, http.MethodGet, "/api/v1/products?"+tc.query, "").fields(t)
			slices.Sort(got)
			want := slices.Clone(tc.fields)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("fields = %v, want %v", got, want)
			}
		})
	}
}
