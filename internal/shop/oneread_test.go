package shop_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

// The one-trip product read (internal/onetrip): on one Redis, with the limiter
// on and the near cache off, an anonymous GET /api/v1/products/{sku}
// runs the limiter's window, the cached document's read and the live
// stock in one script call, and every answer and count is what the
// separate steps gave.

// readSpy counts the round trips to Redis that touch a product read's
// keys (a client's window, a product's cache entry, generation or fill
// lock, a sale hash), whatever else shares the client (the visitor
// counts, the sweeper, the live stock subscription), and of them the
// scripts whose keys are a window and then (after a session's, for a
// signed-in read) a product's cache entry: the one-trip read.
type readSpy struct {
	prefix          string
	trips, combined atomic.Int64
}

func (s *readSpy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *readSpy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		s.count([]redis.Cmder{c})
		return next(ctx, c)
	}
}

func (s *readSpy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.count(cmds)
		return next(ctx, cmds)
	}
}

// count counts one round trip carrying cmds.
func (s *readSpy) count(cmds []redis.Cmder) {
	touched := false
	for _, c := range cmds {
		keys := cmdKeys(c.Args())
		for _, k := range keys {
			touched = touched || s.readKey(k)
		}
		if len(keys) > 1 && strings.HasPrefix(keys[0], s.prefix+"rl:") && s.readsProduct(keys[1:]) {
			s.combined.Add(1)
		}
	}
	if touched {
		s.trips.Add(1)
	}
}

// readsProduct says whether keys hold a product's cache entry (after a
// session's key, for a signed-in read).
func (s *readSpy) readsProduct(keys []string) bool {
	for _, k := range keys {
		if strings.HasPrefix(k, s.prefix+"cache:entry:{product:") {
			return true
		}
	}
	return false
}

func (s *readSpy) readKey(k string) bool {
	for _, p := range []string{"rl:", "cache:entry:{product:", "cache:gen:{product:", "cache:lock:{product:", "sale:"} {
		if strings.HasPrefix(k, s.prefix+p) {
			return true
		}
	}
	return false
}

// cmdKeys are a command's keys: a script's, or the first argument of any
// other command (enough for the commands a read sends).
func cmdKeys(args []any) []string {
	name, _ := args[0].(string)
	if name == "evalsha" || name == "eval" {
		n, _ := args[2].(int)
		keys := make([]string, 0, n)
		for _, k := range args[3:min(len(args), 3+n)] {
			key, _ := k.(string)
			keys = append(keys, key)
		}
		return keys
	}
	if len(args) < 2 {
		return nil
	}
	key, _ := args[1].(string)
	return []string{key}
}

// trips is how many round trips a read's keys saw, and of them one-trip
// reads, while f ran.
func (s *readSpy) during(f func()) (trips, combined int64) {
	t0, c0 := s.trips.Load(), s.combined.Load()
	f()
	return s.trips.Load() - t0, s.combined.Load() - c0
}

// oneRead is an app limiting every client to limit requests a minute,
// with cfg's further changes, whose Redis client is spied on.
func oneRead(t *testing.T, limit int, cfg func(*config.Config)) (*shoptest.App, *readSpy) {
	t.Helper()
	return oneReadWith(t, limit, cfg, shoptest.Options{})
}

// rdShopper is a oneRead app with 10 units of "rd" on sale and the token
// of a shopper signed in as email: the signed-in reads' opening.
func rdShopper(t *testing.T, limit int, email string) (*shoptest.App, *readSpy, string) {
	t.Helper()
	a, spy := oneRead(t, limit, nil)
	a.Sale(t, "rd", 100, 10, 0)
	_, token := a.Shopper(t, email)
	return a, spy, token
}

// oneReadWith is oneRead built with o's further options.
func oneReadWith(t *testing.T, limit int, cfg func(*config.Config), o shoptest.Options) (*shoptest.App, *readSpy) {
	t.Helper()
	stores := shoptest.NewStores(t)
	spy := &readSpy{prefix: stores.Redis.Prefix}
	rdb := redis.NewClient(stores.Redis.Client.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(spy)
	o.Stores, o.Redis = stores, rdb
	o.Config = func(c *config.Config) {
		c.RateLimit = config.RateLimit{Limit: limit, Window: time.Minute}
		if cfg != nil {
			cfg(c)
		}
	}
	return shoptest.New(t, o), spy
}

// counter is a counter of a's registry, 0 when it has not counted.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	if vs := shoptest.Counters(t, reg, name, labels...); len(vs) > 0 {
		return vs[0]
	}
	return 0
}

// cacheCounts are the cache's reads by result and its loader calls.
type cacheCounts struct{ hits, misses, loads float64 }

func cacheCountsOf(t *testing.T, a *shoptest.App) cacheCounts {
	t.Helper()
	return cacheCounts{
		hits:   counter(t, a.Reg, "shop_cache_requests_total", "result", "hit"),
		misses: counter(t, a.Reg, "shop_cache_requests_total", "result", "miss"),
		loads:  counter(t, a.Reg, "shop_cache_loads_total"),
	}
}

// counted is how many requests the limiter holds in every window.
func counted(t *testing.T, a *shoptest.App) int64 {
	t.Helper()
	var n int64
	for _, k := range scan(t, a.Redis.Client, a.Redis.Prefix+"rl:*") {
		n += a.Redis.Client.ZCard(context.Background(), k).Val()
	}
	return n
}

// wantCounted fails unless the limiter holds want requests in every
// window together.
func wantCounted(t *testing.T, a *shoptest.App, want int64) {
	t.Helper()
	if n := counted(t, a); n != want {
		t.Fatalf("the limiter counted %d requests, want %d", n, want)
	}
}

func getProduct(t *testing.T, a *shoptest.App, sku string) openapitest.Reply {
	t.Helper()
	return a.Do(t, http.MethodGet, "/api/v1/products/"+sku, "", "")
}

// wantProduct fails t unless r is the product sku named name with
// available units.
func wantProduct(t *testing.T, r openapitest.Reply, sku, name string, available float64) {
	t.Helper()
	shoptest.WantStatus(t, r, http.StatusOK)
	p := r.JSON(t)
	if p["sku"] != sku || p["name"] != name || p["available"] != available {
		t.Fatalf("read %v, want %s named %q with %v available", p, sku, name, available)
	}
}

// A cached product is read in exactly one round trip, which counts the
// request, answers the live stock and counts a cache hit; the limiter's
// headers are those of a check made first.
func TestOneTripReadHit(t *testing.T) {
	t.Parallel()
	a, spy := oneRead(t, 100, nil)
	a.Sale(t, "rd", 100, 10, 0) // the create writes the entry through
	// The process's first call of the script loads it (NOSCRIPT, then
	// EVAL): one more round trip, once.
	wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 10)
	before := cacheCountsOf(t, a)
	for i := range 3 {
		var r openapitest.Reply
		trips, combined := spy.during(func() { r = getProduct(t, a, "rd") })
		wantProduct(t, r, "rd", "Product rd", 10)
		if trips != 1 || combined != 1 {
			t.Fatalf("read %d: %d round trips, %d one-trip scripts; want 1 and 1", i, trips, combined)
		}
		if r.Header.Get("X-RateLimit-Limit") != "100" || r.Header.Get("X-RateLimit-Remaining") != []string{"98", "97", "96"}[i] {
			t.Fatalf("read %d: limiter headers %v", i, r.Header)
		}
	}
	if got := cacheCountsOf(t, a); got != (cacheCounts{before.hits + 3, before.misses, before.loads}) {
		t.Fatalf("cache counts %+v, want 3 hits more than %+v", got, before)
	}
	wantCounted(t, a, 4)
}

// A round split over stock buckets reads as the sum of its buckets: bucket
// 0, which the one trip reads, holds only its share of the units.
func TestOneTripReadSumsTheBuckets(t *testing.T) {
	t.Parallel()
	a, _ := oneRead(t, 100, nil)
	a.Product(t, "rd", 100)
	a.Round(t, "rd", inventory.Seed{Quantity: 10, Buckets: 4})
	for range 2 {
		wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 10)
	}
}

// A read over the limit gets 429 with Retry-After before anything else
// (an unknown or malformed SKU too), reads nothing (the cache counts no
// read and loads nothing) and is not counted.
func TestOneTripReadLimitedReadsNothing(t *testing.T) {
	t.Parallel()
	a, spy := oneRead(t, 2, nil)
	a.Sale(t, "rd", 100, 10, 0)
	for range 2 {
		wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 10)
	}
	before := cacheCountsOf(t, a)
	for _, sku := range []string{"rd", "no-such", "bad%20sku"} {
		var r openapitest.Reply
		trips, _ := spy.during(func() { r = getProduct(t, a, sku) })
		openapitest.WantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
		if r.Header.Get("X-RateLimit-Remaining") != "0" || r.Header.Get("X-RateLimit-Limit") != "2" {
			t.Fatalf("429 for %s: headers %v", sku, r.Header)
		}
		if trips != 1 {
			t.Fatalf("429 for %s after %d round trips, want 1 (the check)", sku, trips)
		}
	}
	if got := cacheCountsOf(t, a); got != before {
		t.Fatalf("limited reads moved the cache counts from %+v to %+v", before, got)
	}
	wantCounted(t, a, 2)
}

// A write is seen by the next one-trip read: an update written through,
// a delete (the entry dropped: the read misses, fills, answers 404), a
// product created again; the live stock as it changes.
func TestOneTripReadSeesWrites(t *testing.T) {
	t.Parallel()
	a, spy := oneRead(t, 100, nil)
	ctx := context.Background()
	a.Sale(t, "rd", 100, 10, 0)
	wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 10)
	in := inventory.ProductInput{Name: "Renamed", Category: "c", PriceCents: 250}
	if _, err := a.Catalog.Update(ctx, "rd", in); err != nil {
		t.Fatal(err)
	}
	trips, _ := spy.during(func() { wantProduct(t, getProduct(t, a, "rd"), "rd", "Renamed", 10) })
	if trips != 1 {
		t.Fatalf("read after the update: %d round trips, want 1", trips)
	}
	if err := a.Catalog.Delete(ctx, "rd"); err != nil {
		t.Fatal(err)
	}
	openapitest.WantProblem(t, getProduct(t, a, "rd"), http.StatusNotFound, "not_found")
	openapitest.WantProblem(t, getProduct(t, a, "rd"), http.StatusNotFound, "not_found") // the cached not found
	a.Sale(t, "rd", 100, 4, 0)
	wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 4)
	if err := a.Redis.Client.HSet(ctx, a.Stock.SaleKey("rd"), "available", 3).Err(); err != nil {
		t.Fatal(err)
	}
	wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 3)
}

// A product that is not cached is read by the fill path (a miss, one
// load) and cached: the next read is one round trip and a hit. A SKU
// never on sale reads available 0.
func TestOneTripReadMissFills(t *testing.T) {
	t.Parallel()
	a, spy := oneRead(t, 100, nil)
	if _, err := a.DB.Pool.Exec(context.Background(),
		`INSERT INTO products (sku, name, category, price_cents) VALUES ('cold', 'Cold', 'c', 10)`); err != nil {
		t.Fatal(err)
	}
	before := cacheCountsOf(t, a)
	wantProduct(t, getProduct(t, a, "cold"), "cold", "Cold", 0)
	if got := cacheCountsOf(t, a); got != (cacheCounts{before.hits, before.misses + 1, before.loads + 1}) {
		t.Fatalf("after the first read: %+v, want one miss and one load more than %+v", got, before)
	}
	trips, combined := spy.during(func() { wantProduct(t, getProduct(t, a, "cold"), "cold", "Cold", 0) })
	if trips != 1 || combined != 1 {
		t.Fatalf("the second read: %d round trips, %d one-trip scripts; want 1 and 1", trips, combined)
	}
	if got := cacheCountsOf(t, a); got != (cacheCounts{before.hits + 1, before.misses + 1, before.loads + 1}) {
		t.Fatalf("after the second read: %+v, want a hit more", got)
	}
}

// Where the read cannot or should not be one call it keeps its steps:
// SHOP_REDIS_ONE_TRIP off, and reads from memory on (a hit of the near
// cache and the stock view costs the limiter's call alone). A read
// bearing a token is one call too (TestOneTripReadSignedIn).
func TestOneTripReadOnlyWhereItApplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		cfg        func(*config.Config)
		cacheRedis bool // the cache in a Redis of its own
		wantTrips  int64
	}{
		{"one_trip_off", func(c *config.Config) { c.RedisOneTrip = false }, false, 3},
		{"near_cache_on", func(c *config.Config) { c.NearCacheTTL = time.Minute }, false, 1},
		// The window and the stock here, the document there (a hit).
		{"cache_redis_of_its_own", nil, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var o shoptest.Options
			if tc.cacheRedis {
				opts, err := redis.ParseURL(testenv.StartRedis(t).URL)
				if err != nil {
					t.Fatal(err)
				}
				cacheRdb := redis.NewClient(opts)
				t.Cleanup(func() { _ = cacheRdb.Close() })
				o.Cache = cacheRdb
			}
			a, spy := oneReadWith(t, 100, tc.cfg, o)
			a.Sale(t, "rd", 100, 10, 0)
			read := func() { wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 10) }
			read() // fills what the near cache and the stock view keep
			trips, combined := spy.during(read)
			if trips != tc.wantTrips || combined != 0 {
				t.Fatalf("%d round trips, %d one-trip scripts; want %d and 0", trips, combined, tc.wantTrips)
			}
		})
	}
}

// With Redis gone after a one-trip read, the read still answers from
// PostgreSQL (available 0, the limiter's and the cache's errors counted);
// with PostgreSQL gone too, 503 with Retry-After, never a 500.
func TestOneTripReadRedisDown(t *testing.T) {
	t.Parallel()
	stores := shoptest.NewStores(t)
	opts := stores.Redis.Client.Options()
	rproxy := testenv.NewProxy(t, opts.Addr)
	ropts := *opts
	ropts.Addr, ropts.MaxRetries, ropts.DialTimeout = rproxy.Addr(), -1, 200*time.Millisecond
	rdb := redis.NewClient(&ropts)
	t.Cleanup(func() { _ = rdb.Close() })
	pgcfg, err := pgxpool.ParseConfig(stores.DB.URL)
	if err != nil {
		t.Fatal(err)
	}
	pproxy := testenv.NewProxy(t, net.JoinHostPort(pgcfg.ConnConfig.Host, strconv.Itoa(int(pgcfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(pproxy.Addr())
	p, _ := strconv.ParseUint(port, 10, 16)
	pgcfg.ConnConfig.Host, pgcfg.ConnConfig.Port = host, uint16(p)
	pgcfg.ConnConfig.ConnectTimeout = 200 * time.Millisecond
	pool, err := pgxpool.NewWithConfig(context.Background(), pgcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	a := shoptest.New(t, shoptest.Options{Stores: stores, Redis: rdb, DB: pool, Config: func(c *config.Config) {
		c.RateLimit = config.RateLimit{Limit: 100, Window: time.Minute}
	}})
	a.Sale(t, "rd", 100, 10, 0)
	wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 10)

	rproxy.Down()
	wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 0)
	if n := counter(t, a.Reg, "shop_ratelimit_decisions_total", "decision", "error"); n != 1 {
		t.Fatalf("limiter errors %v, want 1", n)
	}
	if n := counter(t, a.Reg, "shop_cache_errors_total", "op", "get"); n != 1 {
		t.Fatalf("cache read errors %v, want 1", n)
	}
	pproxy.Down()
	openapitest.WantProblem(t, getProduct(t, a, "rd"), http.StatusServiceUnavailable, "unavailable")
}

// On a Redis Cluster the read keeps its steps (the window's, the cache's
// and the sale's keys are on different slots): it answers, the limiter
// still limits, and nothing fails.
func TestOneTripReadOnACluster(t *testing.T) {
	t.Parallel()
	a := shoptest.OnCluster(t, testenv.StartCluster(t, 3), nil, func(cfg *config.Config) {
		cfg.RateLimit = config.RateLimit{Limit: 2, Window: time.Minute}
	})
	a.Sale(t, "rd", 100, 10, 0)
	for range 2 {
		wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 10)
	}
	openapitest.WantProblem(t, getProduct(t, a, "rd"), http.StatusTooManyRequests, "rate_limited")
	for _, m := range []struct{ name, label, value string }{
		{"shop_ratelimit_decisions_total", "decision", "error"},
		{"shop_cache_errors_total", "op", "get"},
	} {
		if n := counter(t, a.Reg, m.name, m.label, m.value); n != 0 {
			t.Fatalf("%s{%s=%s} = %v on a cluster", m.name, m.label, m.value, n)
		}
	}
}

// Readers released together from one address, more than its limit:
// exactly `limit` read the product (each a cache hit in its one call) and
// the others get 429 having read nothing; the limiter counted `limit`.
func TestOneTripReadRaceExactTotals(t *testing.T) {
	t.Parallel()
	const limit, readers = 40, 100
	a, spy := oneRead(t, limit, nil)
	a.Sale(t, "rd", 100, 10, 0)
	// Loads the script; counted in the window of app.Test's address, not
	// the readers' (loopback).
	wantProduct(t, getProduct(t, a, "rd"), "rd", "Product rd", 10)
	before, combined0 := cacheCountsOf(t, a), spy.combined.Load()
	base := a.Serve(t)
	got := burst(t, readers, "reader", []int{http.StatusOK, http.StatusTooManyRequests}, func(int) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/products/rd", nil)
		return req
	})
	ok, limited := got[http.StatusOK], got[http.StatusTooManyRequests]
	if ok != limit || limited != readers-limit {
		t.Fatalf("read %d, limited %d; want %d and %d", ok, limited, limit, readers-limit)
	}
	if got := cacheCountsOf(t, a); got != (cacheCounts{before.hits + limit, before.misses, before.loads}) {
		t.Fatalf("cache counts %+v, want exactly %d hits more than %+v", got, limit, before)
	}
	if n := spy.combined.Load() - combined0; n != readers {
		t.Fatalf("%d one-trip scripts, want one per reader (%d)", n, readers)
	}
	wantCounted(t, a, limit+1)
}

// A signed-in read is one round trip too: the window, the session check
// and the read in one script call (issue 47), with the limiter's headers
// of a check made first.
func TestOneTripReadSignedIn(t *testing.T) {
	t.Parallel()
	a, spy, token := rdShopper(t, 100, "rd-signed-in@example.com")
	read := func() openapitest.Reply { return a.Do(t, http.MethodGet, "/api/v1/products/rd", token, "") }
	wantProduct(t, read(), "rd", "Product rd", 10) // loads the script
	var r openapitest.Reply
	trips, combined := spy.during(func() { r = read() })
	wantProduct(t, r, "rd", "Product rd", 10)
	if trips != 1 || combined != 1 {
		t.Fatalf("%d round trips, %d one-trip scripts; want 1 and 1", trips, combined)
	}
	if r.Header.Get("X-RateLimit-Limit") != "100" || r.Header.Get("X-RateLimit-Remaining") == "" {
		t.Fatalf("limiter headers %v", r.Header)
	}
}

// A product read is public: a revoked token, or one that is no token at
// all, reads anonymously, in the one trip.
func TestOneTripReadRevokedTokenReadsAnonymously(t *testing.T) {
	t.Parallel()
	a, spy, token := rdShopper(t, 100, "rd-revoked@example.com")
	shoptest.WantStatus(t, a.Do(t, http.MethodPost, "/api/v1/auth/logout", token, ""), http.StatusNoContent)
	wantProduct(t, a.Do(t, http.MethodGet, "/api/v1/products/rd", token, ""), "rd", "Product rd", 10)
	for _, tok := range []string{token, "not-a-token"} {
		var r openapitest.Reply
		trips, combined := spy.during(func() { r = a.Do(t, http.MethodGet, "/api/v1/products/rd", tok, "") })
		wantProduct(t, r, "rd", "Product rd", 10)
		if trips != 1 || combined != 1 {
			t.Fatalf("token %.12q: %d round trips, %d one-trip scripts; want 1 and 1", tok, trips, combined)
		}
	}
	// A refused token on an unknown product still answers 404, not 401.
	openapitest.WantProblem(t, a.Do(t, http.MethodGet, "/api/v1/products/no-such", token, ""), http.StatusNotFound, "not_found")
}

// A signed-in read over the limit gets 429 from the one trip's window,
// having read nothing and checked no session (its idle expiry not slid).
func TestOneTripReadSignedInOverTheLimit(t *testing.T) {
	t.Parallel()
	a, spy, token := rdShopper(t, 2, "rd-limited@example.com")
	read := func() openapitest.Reply { return a.Do(t, http.MethodGet, "/api/v1/products/rd", token, "") }
	for range 2 {
		wantProduct(t, read(), "rd", "Product rd", 10)
	}
	before := cacheCountsOf(t, a)
	var r openapitest.Reply
	trips, combined := spy.during(func() { r = read() })
	openapitest.WantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") == "" || r.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("429 headers %v", r.Header)
	}
	if trips != 1 || combined != 1 {
		t.Fatalf("%d round trips, %d one-trip scripts; want 1 and 1", trips, combined)
	}
	if got := cacheCountsOf(t, a); got != before {
		t.Fatalf("a limited read moved the cache counts from %+v to %+v", before, got)
	}
	wantCounted(t, a, 2)
}
