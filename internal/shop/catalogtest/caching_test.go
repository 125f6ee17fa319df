package catalogtest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/racetest"
)

// The near cache is off in the tests of the Redis cache below: they check
// what Redis alone guarantees (near_test.go checks the near cache).

func TestWritesAreWrittenThroughAndReadsHitTheCache(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	a, b := newInstance(t, st, nearOff), newInstance(t, st, nearOff)
	a.create(t, "p1", "c", 100)
	// b has never read p1: the entry a wrote through answers, no load.
	if p := b.do(t, http.MethodGet, "/api/v1/products/p1", "").product(t); p.PriceCents != 100 {
		t.Fatalf("b reads %+v", p)
	}
	st.exec(t, `UPDATE products SET name = 'changed behind the cache' WHERE sku = 'p1'`)
	if p := b.do(t, http.MethodGet, "/api/v1/products/p1", "").product(t); p.Name != "Product p1" {
		t.Errorf("b reads %q: not served from the cache", p.Name)
	}
	if hits, loads := b.metric(t, "shop_cache_requests_total", "result", "hit"), b.metric(t, "shop_cache_loads_total"); hits != 2 || loads != 0 {
		t.Errorf("b: hits = %v loads = %v, want 2 and 0", hits, loads)
	}
	// A listing misses once, then hits: its chunk and the category counts.
	for range 2 {
		b.do(t, http.MethodGet, "/api/v1/products?category=c", "")
	}
	if misses, loads := b.metric(t, "shop_cache_requests_total", "result", "miss"), b.metric(t, "shop_cache_loads_total"); misses != 2 || loads != 2 {
		t.Errorf("b after two listings: misses = %v loads = %v, want 2 and 2", misses, loads)
	}
	if r := b.do(t, http.MethodGet, "/metrics", ""); !strings.Contains(string(r.body), `shop_cache_requests_total{result="hit"} 4`) {
		t.Errorf("/metrics lacks the cache hits")
	}
}

func TestReadAfterWriteFromAnotherInstance(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	writer, reader := newInstance(t, st, nearOff), newInstance(t, st, nearOff)
	writer.create(t, "p1", "old", 100)
	writer.create(t, "p2", "new", 200)
	skus := func(query string) []string {
		var out []string
		for _, p := range reader.do(t, http.MethodGet, "/api/v1/products"+query, "").page(t).Items {
			out = append(out, p.SKU+":"+p.Category)
		}
		return out
	}
	// Fill the reader's view of everything the write will touch.
	reader.do(t, http.MethodGet, "/api/v1/products/p1", "")
	before := [][]string{skus("?category=old"), skus("?category=new"), skus("")}

	r := writer.do(t, http.MethodPut, "/api/v1/admin/products/p1", `{"name":"Moved","description":"d","category":"new","price_cents":150}`)
	if r.status != http.StatusOK {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	if p := reader.do(t, http.MethodGet, "/api/v1/products/p1", "").product(t); p.Name != "Moved" || p.PriceCents != 150 || p.Category != "new" {
		t.Errorf("reader sees %+v after the update", p)
	}
	after := [][]string{skus("?category=old"), skus("?category=new"), skus("")}
	want := [][]string{nil, {"p1:new", "p2:new"}, {"p1:new", "p2:new"}}
	for i := range want {
		if !slices.Equal(after[i], want[i]) {
			t.Errorf("listing %d: %v before, %v after the move, want %v", i, before[i], after[i], want[i])
		}
	}

	writer.do(t, http.MethodDelete, "/api/v1/admin/products/p1", "")
	reader.do(t, http.MethodGet, "/api/v1/products/p1", "").problem(t, http.StatusNotFound, "not_found")
	if got := skus("?category=new"); !slices.Equal(got, []string{"p2:new"}) {
		t.Errorf("listing after delete: %v", got)
	}
}

func TestInvalidateCategoryDropsItsListingsOnly(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "x1", "c1", 1)
	in.create(t, "y1", "c2", 1)
	names := func(path string) []string {
		r := in.do(t, http.MethodGet, path, "")
		if strings.Contains(path, "?") {
			var out []string
			for _, p := range r.page(t).Items {
				out = append(out, p.Name)
			}
			return out
		}
		return []string{r.product(t).Name}
	}
	paths := []string{"/api/v1/products?category=c1", "/api/v1/products?category=c2", "/api/v1/products?limit=20", "/api/v1/products/x1"}
	for _, p := range paths {
		names(p) // fill
	}
	st.exec(t, `UPDATE products SET name = 'sql'`)
	if r := in.do(t, http.MethodPost, "/api/v1/admin/categories/c1/invalidate", ""); r.status != http.StatusNoContent {
		t.Fatalf("invalidate: %d %s", r.status, r.body)
	}
	want := [][]string{{"sql"}, {"Product y1"}, {"sql", "sql"}, {"Product x1"}}
	for i, p := range paths {
		if got := names(p); !slices.Equal(got, want[i]) {
			t.Errorf("%s = %v after invalidating c1, want %v", p, got, want[i])
		}
	}
	in.do(t, http.MethodPost, "/api/v1/admin/categories/no%20pe/invalidate", "").problem(t, http.StatusBadRequest, "invalid_request")
}

func TestAvailableIsLiveAndNeverCached(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st, nearOff) // HSET below publishes no change
	in.create(t, "s1", "c", 1)
	ctx := context.Background()
	sale := st.prefix + "sale:{s1}"
	for _, n := range []int64{7, 3, 0} {
		st.rdb.HSet(ctx, sale, "available", n)
		if p := in.do(t, http.MethodGet, "/api/v1/products/s1", "").product(t); p.Available != n {
			t.Errorf("available = %d, want the live %d", p.Available, n)
		}
		if p := in.do(t, http.MethodGet, "/api/v1/products?category=c", "").page(t); p.Items[0].Available != n {
			t.Errorf("listed available = %d, want the live %d", p.Items[0].Available, n)
		}
	}
	st.rdb.Del(ctx, sale)
	if p := in.do(t, http.MethodGet, "/api/v1/products/s1", "").product(t); p.Available != 0 {
		t.Errorf("available without a sale = %d", p.Available)
	}
	var keys []string
	iter := st.rdb.Scan(ctx, 0, st.prefix+"cache:entry:*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if len(keys) < 2 {
		t.Fatalf("cache entries: %v", keys)
	}
	for _, k := range keys {
		if v := st.rdb.Get(ctx, k).Val(); strings.Contains(v, "available") {
			t.Errorf("%s caches the live stock: %s", k, v)
		}
	}
}

func TestConcurrentMissesLoadOnce(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	writer, in := newInstance(t, st), newInstance(t, st)
	writer.create(t, "hot", "c", 1)
	st.rdb.Del(context.Background(), st.prefix+"cache:entry:{product:hot}") // as if it expired
	var failed atomic.Int32
	racetest.Together(racetest.Times(200, func(int) {
		if p, err := in.Catalog.Get(context.Background(), "hot"); err != nil || p.SKU != "hot" {
			failed.Add(1)
		}
	})...)
	if failed.Load() > 0 {
		t.Errorf("%d reads failed", failed.Load())
	}
	if loads := in.metric(t, "shop_cache_loads_total"); loads != 1 {
		t.Errorf("loads = %v, want 1 for 200 concurrent misses", loads)
	}
}

// TestNoStaleReadAfterAnUpdate (reliability test 30b): readers on two
// instances hammer a product whose cache entry keeps expiring (so fills
// race the writes) while a third instance raises its price round after
// round. No read that starts after an update returned may see an older
// price.
func TestNoStaleReadAfterAnUpdate(t *testing.T) {
	t.Parallel()
	const rounds = 40
	st := newStores(t)
	// The readers' fills are slow to store (their scripts lag 2ms), so a
	// fill that read the old row often stores after the writer's
	// write-through: the stale-set race the generations must defeat.
	slow := st.withClient(t, slowScripts(2*time.Millisecond))
	writer, r1, r2 := newInstance(t, st, nearOff), newInstance(t, slow, nearOff), newInstance(t, slow, nearOff)
	writer.create(t, "p", "c", 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var written atomic.Int64 // the price of the last update that returned
	var stale, reads atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() { // expiry: the entry vanishes under the readers
		for ctx.Err() == nil {
			st.rdb.Del(ctx, st.prefix+"cache:entry:{product:p}")
			time.Sleep(3 * time.Millisecond)
		}
	})
	for i := range 16 {
		in := []*instance{r1, r2}[i%2]
		wg.Go(func() {
			for ctx.Err() == nil {
				floor := written.Load()
				p, err := in.Catalog.Get(ctx, "p")
				if err == nil && p.PriceCents < floor {
					stale.Add(1)
				}
				reads.Add(1)
			}
		})
	}
	for round := int64(1); round <= rounds; round++ {
		if _, err := writer.Catalog.Update(ctx, "p", inventoryInput("c", round)); err != nil {
			t.Fatal(err)
		}
		written.Store(round)
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if stale.Load() > 0 {
		t.Errorf("%d of %d reads saw an older price than an update that had returned", stale.Load(), reads.Load())
	}
}
