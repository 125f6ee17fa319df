package catalogtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
)

// products creates n products sku-000.. directly in the catalog, in
// categories "odd" and "even" by index, and returns the skus of each.
func (in *instance) products(t *testing.T, n int) (all, odd []string) {
	t.Helper()
	for i := range n {
		sku, category := fmt.Sprintf("sku-%03d", i), "even"
		if i%2 == 1 {
			category = "odd"
			odd = append(odd, sku)
		}
		if _, err := in.Catalog.Create(context.Background(), sku, inventory.ProductInput{Name: "P", Category: category, PriceCents: 1}); err != nil {
			t.Fatal(err)
		}
		all = append(all, sku)
	}
	return all, odd
}

// Pages of any limit cut from the cached chunks (100 rows) list every
// product once, in order, across chunk boundaries.
func TestListAcrossChunks(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	all, odd := in.products(t, 230)
	for _, limit := range []string{"1", "7", "33", "99", "100"} {
		for category, want := range map[string][]string{"": all, "odd": odd} {
			t.Run(category+"_limit_"+limit, func(t *testing.T) {
				q := url.Values{"limit": {limit}}
				if category != "" {
					q.Set("category", category)
				}
				got, _ := in.listAllPages(t, q)
				if !slices.Equal(got, want) {
					t.Fatalf("listed %d skus, want %d: %v", len(got), len(want), got)
				}
			})
		}
	}
}

// listAllPages is listAll without its page cap (a limit-1 walk has 230).
func (in *instance) listAllPages(t *testing.T, q url.Values) ([]string, int) {
	t.Helper()
	var skus []string
	for pages := 1; ; pages++ {
		p := in.do(t, http.MethodGet, "/api/v1/products?"+q.Encode(), "").page(t)
		for _, it := range p.Items {
			skus = append(skus, it.SKU)
		}
		if p.NextCursor == nil || pages > 1000 {
			return skus, pages
		}
		q.Set("cursor", *p.NextCursor)
	}
}

// A cursor handed out before the listing changed still continues right
// after its sku: rows deleted or added before it shift the chunks, and
// the page is then answered from PostgreSQL rather than skip or repeat.
func TestListCursorAfterTheListingShifted(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	all, _ := in.products(t, 260)
	// Walk to the middle of the third chunk.
	q := url.Values{"limit": {"30"}}
	var seen []string
	for len(seen) < 210 {
		p := in.do(t, http.MethodGet, "/api/v1/products?"+q.Encode(), "").page(t)
		for _, it := range p.Items {
			seen = append(seen, it.SKU)
		}
		q.Set("cursor", *p.NextCursor)
	}
	cursor := q.Get("cursor")
	for name, change := range map[string]func(){
		"deleted_before": func() {
			for _, sku := range all[:45] {
				if err := in.Catalog.Delete(context.Background(), sku); err != nil {
					t.Fatal(err)
				}
			}
		},
		"added_before": func() {
			for i := range 70 {
				_, err := in.Catalog.Create(context.Background(), fmt.Sprintf("aaa-%02d", i), inventory.ProductInput{Name: "P", Category: "new", PriceCents: 1})
				if err != nil {
					t.Fatal(err)
				}
			}
		},
	} {
		change()
		q := url.Values{"limit": {"30"}, "cursor": {cursor}}
		got, _ := in.listAllPages(t, q)
		if want := all[210:]; !slices.Equal(got, want) {
			t.Fatalf("%s: after the cursor %v, want %v", name, got, want)
		}
	}
}

// cacheKeys counts the keys under the cache's prefix (SCAN, never KEYS).
func (st stores) cacheKeys(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	iter := st.rdb.Scan(ctx, 0, st.prefix+"cache:*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// status sends an anonymous GET without the OpenAPI check (thousands of
// them) and returns the status.
func (in *instance) status(t *testing.T, path string) int {
	t.Helper()
	resp, err := in.app.Test(httptest.NewRequest(http.MethodGet, path, nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// Thousands of distinct anonymous reads (categories that do not exist,
// every limit, cursors forged and real) make the cache store nothing
// beyond what the catalog itself fills: before, 6,000 such requests filled
// a 4 MB Redis and purchases then failed.
func TestAnonymousReadsDoNotGrowTheCache(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	all, _ := in.products(t, 250)
	// What legitimate reads fill: every listing walked, every product read.
	for _, q := range []string{"", "category=odd", "category=even"} {
		in.listAllPages(t, mustQuery(q))
	}
	for _, sku := range all {
		in.status(t, "/api/v1/products/"+sku)
	}
	filled := st.cacheKeys(t)
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	var paths []string
	for i := range 1000 {
		paths = append(paths, fmt.Sprintf("/api/v1/products?category=none-%d", i))
	}
	for i := range 500 {
		category := []string{"", "&category=odd", "&category=even"}[i%3]
		limit := strconv.Itoa(1 + i%inventory.MaxLimit)
		sku := all[i%len(all)]
		cursors := []string{
			b64(strconv.Itoa(i%3) + ":" + sku),   // a real sku, maybe in its chunk
			b64(strconv.Itoa(i) + ":" + sku),     // a chunk past the end
			b64(sku + strconv.Itoa(i)),           // no chunk, a sku that is not
			b64(strconv.Itoa(i%3) + ":zz" + sku), // a sku past its chunk
		}
		for _, c := range cursors {
			paths = append(paths, "/api/v1/products?limit="+limit+category+"&cursor="+c)
		}
	}
	failed := map[int]string{}
	for _, p := range paths {
		if s := in.status(t, p); s != http.StatusOK {
			failed[s] = p
		}
	}
	// Fill locks are deleted after their fill (and expire in 2 s): allow a
	// few in flight.
	got := st.cacheKeys(t)
	t.Logf("%d anonymous reads; cache keys %d after legitimate reads, %d after", len(paths), filled, got)
	if got > filled+5 {
		t.Errorf("%d anonymous reads grew the cache from %d to %d keys", len(paths), filled, got)
	}
	for s, p := range failed {
		t.Errorf("GET %s = %d (and others)", p, s)
	}
}

func mustQuery(q string) url.Values {
	v, _ := url.ParseQuery(q)
	return v
}

// A page cut from two chunks read from before and after a change of the
// listing (the first still cached, the second loaded anew: an admin write
// landed between the two reads) skips or repeats no row: the chunks do not
// meet, and the page is answered from PostgreSQL.
func TestPageAcrossChunksOfTwoListings(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st, nearOff)
	all, _ := in.products(t, 230)
	first := in.do(t, http.MethodGet, "/api/v1/products?limit=90", "").page(t)
	if len(first.Items) != 90 || first.NextCursor == nil {
		t.Fatalf("first page: %d items, cursor %v", len(first.Items), first.NextCursor)
	}
	page := url.Values{"limit": {"20"}, "cursor": {*first.NextCursor}}.Encode()
	if got, _ := in.listAllPages(t, url.Values{"limit": {"20"}, "cursor": {*first.NextCursor}}); !slices.Equal(got, all[90:]) {
		t.Fatalf("before the change: %v", got)
	}
	// sku-010 goes behind the cache's back, and only the second chunk is
	// loaded anew, as if the deletion had come between the two reads.
	st.exec(t, `DELETE FROM products WHERE sku = 'sku-010'`)
	ctx := context.Background()
	iter := st.rdb.Scan(ctx, 0, st.prefix+"cache:*", 1000).Iterator()
	dropped := 0
	for iter.Next(ctx) {
		if strings.HasSuffix(iter.Val(), "{listing:*:1}") {
			dropped += int(st.rdb.Del(ctx, iter.Val()).Val())
		}
	}
	if iter.Err() != nil || dropped != 1 {
		t.Fatalf("dropped %d cached second chunks (%v), want 1", dropped, iter.Err())
	}
	p := in.do(t, http.MethodGet, "/api/v1/products?"+page, "").page(t)
	var got []string
	for _, it := range p.Items {
		got = append(got, it.SKU)
	}
	if want := all[90:110]; !slices.Equal(got, want) {
		t.Fatalf("the page across the chunks is %v, want %v", got, want)
	}
}
