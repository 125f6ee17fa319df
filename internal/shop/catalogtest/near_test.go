package catalogtest

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/racetest"
)

// The product reads from memory (SHOP_NEAR_CACHE_TTL): the near cache in
// front of the Redis cache, and available from the stock view.

// nearHour sets a near TTL no test outlives: what a reader sees after a
// change is then what it heard, never the TTL's doing.
func nearHour(c *config.Config) { c.NearCacheTTL = time.Hour }

// waitMetric waits until in's counter name reaches n (a hang after 10 s
// fails the test; nothing here measures time).
func waitMetric(t *testing.T, in *instance, name string, n float64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); in.metric(t, name) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s to reach %v (at %v)", name, n, in.metric(t, name))
		}
	}
}

// nearHeard waits until in has heard n catalog invalidations in all. A
// write publishes one for the product and one per listing tag it drops:
// the unfiltered listings' and its categories' (old and new).
func nearHeard(t *testing.T, in *instance, n float64) {
	t.Helper()
	waitMetric(t, in, "shop_cache_near_messages_total", n)
}

func (in *instance) get(t *testing.T, sku string) result {
	t.Helper()
	return in.do(t, http.MethodGet, "/api/v1/products/"+sku, "")
}

// TestNearCacheAcrossInstances: another instance's create, update (with a
// move), listing and delete reach a reader's near cache once it has heard
// them, though its entries would live an hour; and the reader answers
// from memory meanwhile.
func TestNearCacheAcrossInstances(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	writer, reader := newInstance(t, st, nearHour), newInstance(t, st, nearHour)
	reader.get(t, "p1").problem(t, http.StatusNotFound, "not_found") // near-cached: not found
	writer.create(t, "p1", "old", 100)
	nearHeard(t, reader, 3) // p1, category:*, category:old
	if p := reader.get(t, "p1").product(t); p.PriceCents != 100 {
		t.Fatalf("reader sees %+v after the create", p)
	}
	st.exec(t, `UPDATE products SET name = 'behind the caches' WHERE sku = 'p1'`)
	st.rdb.Del(context.Background(), st.prefix+"cache:entry:{product:p1}")
	if p := reader.get(t, "p1").product(t); p.Name != "Product p1" {
		t.Errorf("reader reads %q: not from its near cache", p.Name)
	}
	if hits := reader.metric(t, "shop_cache_near_requests_total", "result", "hit"); hits < 1 {
		t.Errorf("near hits = %v", hits)
	}
	if n := len(reader.do(t, http.MethodGet, "/api/v1/products?category=new", "").page(t).Items); n != 0 {
		t.Fatalf("listing of new before the move: %d items", n)
	}

	r := writer.do(t, http.MethodPut, "/api/v1/admin/products/p1", `{"name":"Moved","description":"d","category":"new","price_cents":150}`)
	if r.status != http.StatusOK {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	nearHeard(t, reader, 7) // p1, category:*, category:old, category:new
	if p := reader.get(t, "p1").product(t); p.Name != "Moved" || p.PriceCents != 150 {
		t.Errorf("reader sees %+v after the update was heard", p)
	}
	if items := reader.do(t, http.MethodGet, "/api/v1/products?category=new", "").page(t).Items; len(items) != 1 || items[0].Name != "Moved" {
		t.Errorf("listing of new after the move was heard: %+v", items)
	}

	writer.do(t, http.MethodDelete, "/api/v1/admin/products/p1", "")
	nearHeard(t, reader, 10) // p1, category:*, category:new
	reader.get(t, "p1").problem(t, http.StatusNotFound, "not_found")
}

// TestNearCacheReadersRacingUpdates (the near twin of reliability test
// 30b): readers on one instance, released together with a writer on
// another raising a price round after round, keep no older price once the
// last update is heard, though their entries would live an hour.
func TestNearCacheReadersRacingUpdates(t *testing.T) {
	t.Parallel()
	const rounds = 40
	st := newStores(t)
	// The reader's Redis reads act on their replies 10ms late, longer than
	// an update takes, so that a fill that read the old entry often stores
	// after it heard the next update.
	slow := st.withClient(t, slowReplies(10*time.Millisecond))
	writer, reader := newInstance(t, st, nearHour), newInstance(t, slow, nearHour)
	writer.create(t, "p", "c", 0)
	nearHeard(t, reader, 3)
	var stop atomic.Bool
	var failed atomic.Int32
	wait := racetest.Start(racetest.Times(16, func(int) {
		for !stop.Load() {
			if _, err := reader.Catalog.Get(context.Background(), "p"); err != nil {
				failed.Add(1)
			}
		}
	})...)
	ctx := context.Background()
	for round := int64(1); round <= rounds; round++ {
		if _, err := writer.Catalog.Update(ctx, "p", inventoryInput("c", round)); err != nil {
			t.Fatal(err)
		}
	}
	nearHeard(t, reader, 3+3*rounds) // each update: p, category:*, category:c
	stop.Store(true)
	wait()
	if failed.Load() > 0 {
		t.Fatalf("%d reads failed", failed.Load())
	}
	for range 3 {
		if p, err := reader.Catalog.Get(ctx, "p"); err != nil || p.PriceCents != rounds {
			t.Fatalf("after every update was heard: %+v %v, want price %d", p, err, rounds)
		}
	}
}

// TestAvailableFollowsTheStockChanges: the reader's available follows a
// purchase and a new seeding made through another instance once it has
// heard them (its view's TTL is an hour: only the messages can do it), and
// a change that published nothing shows within the TTL.
func TestAvailableFollowsTheStockChanges(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	writer, reader := newInstance(t, st, nearHour), newInstance(t, st, nearHour)
	writer.create(t, "s1", "c", 100)
	// Each seeding and each purchase publishes one change.
	writer.seed(t, "s1", `{"quantity":5,"per_user_limit":0}`)
	waitMetric(t, reader, "shop_live_messages_total", 1)
	if p := reader.get(t, "s1").product(t); p.Available != 5 {
		t.Fatalf("available %d after seeding 5", p.Available)
	}
	if _, err := buy(t, st, writer.stock, "u1", "s1", 2); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, reader, "shop_live_messages_total", 2)
	if p := reader.get(t, "s1").product(t); p.Available != 3 {
		t.Errorf("available %d after a purchase of 2 was heard, want 3", p.Available)
	}
	writer.seed(t, "s1", `{"quantity":9,"per_user_limit":0}`)
	waitMetric(t, reader, "shop_live_messages_total", 3)
	if items := reader.do(t, http.MethodGet, "/api/v1/products?category=c", "").page(t).Items; items[0].Available != 9 {
		t.Errorf("listed available %d after a new round of 9 was heard", items[0].Available)
	}

	// A change that publishes nothing (as if its message were lost): the
	// hour-long view keeps the old figure, a view of 50ms shows it once
	// 50ms have passed since its entry was filled.
	const ttl = 50 * time.Millisecond
	short := newInstance(t, st, func(c *config.Config) { c.NearCacheTTL = ttl })
	short.get(t, "s1")
	st.rdb.HSet(context.Background(), st.prefix+"sale:{s1}", "available", 4)
	time.Sleep(ttl + 10*time.Millisecond)
	if p := short.get(t, "s1").product(t); p.Available != 4 {
		t.Errorf("available %d a TTL after an unpublished change to 4", p.Available)
	}
	if p := reader.get(t, "s1").product(t); p.Available != 9 {
		t.Errorf("the hour-long view reads %d: not from the view", p.Available)
	}
}

// TestNearOffReadsRedisEveryTime: with SHOP_NEAR_CACHE_TTL=0 nothing is
// answered from memory, as before the near cache.
func TestNearOffReadsRedisEveryTime(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st, nearOff)
	in.create(t, "s1", "c", 1)
	in.seed(t, "s1", `{"quantity":5,"per_user_limit":0}`)
	for i := range 3 {
		st.rdb.HSet(context.Background(), st.prefix+"sale:{s1}", "available", i)
		st.rdb.Set(context.Background(), st.prefix+"cache:entry:{product:s1}",
			fmt.Sprintf(`+{"sku":"s1","name":"n%d","category":"c"}`, i), time.Minute)
		if p := in.get(t, "s1").product(t); p.Available != int64(i) || p.Name != fmt.Sprintf("n%d", i) {
			t.Errorf("read %d: %+v, want Redis's at once", i, p)
		}
	}
	if hits := in.metric(t, "shop_cache_near_requests_total"); hits != 0 {
		t.Errorf("near cache reads with it off: %v", hits)
	}
}
