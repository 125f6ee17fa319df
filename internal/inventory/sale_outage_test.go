package inventory_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/testenv"
)

// stockBound is three times the longest a stock route may take while a
// store hangs (dbTimeout + redisTimeout, see Sales): generous for a loaded
// machine, far below the tens of seconds a hang lasts.
const stockBound = 3 * (3*time.Second + time.Second)

// TestStockRoutesWhilePostgresHangs: PostgreSQL stops answering (a proxy
// that stops forwarding, as a SIGSTOPped server or a dead network path
// would): both stock routes answer 503 with Retry-After within their
// deadline, and the seeding refused does not go live when PostgreSQL comes
// back, although the hung INSERT then commits its (never opened) row.
func TestStockRoutesWhilePostgresHangs(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	pool, proxy := proxiedPostgres(t)
	st.db = pool
	in := newInstance(t, st)
	in.create(t, "hang-1", "c", 100)
	first := in.seed(t, "hang-1", `{"quantity":10}`)

	proxy.Stall(true)
	t.Cleanup(func() { proxy.Stall(false) })
	put := within(t, stockBound, proxy, func() result {
		return in.do(t, http.MethodPut, "/api/v1/admin/products/hang-1/stock", `{"quantity":99}`)
	})
	put.problem(t, http.StatusServiceUnavailable, "unavailable") // with Retry-After
	within(t, stockBound, proxy, func() result {
		return in.do(t, http.MethodGet, "/api/v1/admin/products/hang-1/stock", "")
	}).problem(t, http.StatusServiceUnavailable, "unavailable")

	proxy.Stall(false)
	time.Sleep(500 * time.Millisecond) // PostgreSQL runs what waited
	rep := in.do(t, http.MethodGet, "/api/v1/admin/products/hang-1/stock", "").stockReport(t)
	if *rep.RoundID != *first.RoundID || rep.Quantity != 10 || rep.Available != 10 {
		t.Fatalf("after the 503 the stock report is %+v, want round %d with 10 units as before", rep, *first.RoundID)
	}
}

// TestSeedWhileRedisHangs: Redis stalls (SIGSTOP) after the round's row is
// recorded: the seeding answers 503 within its deadline, and when Redis
// resumes and runs the seed script that was waiting in its socket, the
// script refuses to open the round: the old round stays live.
func TestSeedWhileRedisHangs(t *testing.T) {
	t.Parallel()
	rs := testenv.StartRedis(t)
	rdb, err := database.OpenRedis(context.Background(), rs.URL, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st := newStores(t)
	st.rdb = rdb
	in := newInstance(t, st)
	in.create(t, "hang-2", "c", 100)
	first := in.seed(t, "hang-2", `{"quantity":10}`) // the script is loaded

	rs.Pause(t)
	start := time.Now()
	in.do(t, http.MethodPut, "/api/v1/admin/products/hang-2/stock", `{"quantity":99}`).
		problem(t, http.StatusServiceUnavailable, "unavailable")
	if d := time.Since(start); d > stockBound {
		t.Errorf("PUT stock took %s with Redis hung, want under %s", d, stockBound)
	}
	rs.Resume(t)
	time.Sleep(300 * time.Millisecond) // Redis runs what waited
	round, err := rdb.HGet(context.Background(), in.Config.KeyPrefix+"sale:{hang-2}", "round").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if round != *first.RoundID {
		t.Fatalf("live round %d after the 503, want %d: the refused seeding went live when Redis resumed", round, *first.RoundID)
	}
	if rep := in.do(t, http.MethodGet, "/api/v1/admin/products/hang-2/stock", "").stockReport(t); rep.Available != 10 {
		t.Fatalf("stock report %+v, want the first round's 10 units", rep)
	}
}

// within runs f and fails t if it takes longer than bound; a call still
// hanging at twice the bound is released by ending the proxy's stall.
func within(t *testing.T, bound time.Duration, proxy *testenv.Proxy, f func() result) result {
	t.Helper()
	start := time.Now()
	done := make(chan result, 1)
	go func() { done <- f() }()
	select {
	case r := <-done:
		if d := time.Since(start); d > bound {
			t.Errorf("took %s, want under %s", d, bound)
		}
		return r
	case <-time.After(2 * bound):
		t.Errorf("still waiting after %s: hung", 2*bound)
		proxy.Stall(false)
		return <-done
	}
}

// proxiedPostgres opens a fresh test database as `shop serve` does
// (database.OpenPostgres), through a proxy the test can stall.
func proxiedPostgres(t *testing.T) (*pgxpool.Pool, *testenv.Proxy) {
	t.Helper()
	d := testenv.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	proxy := testenv.NewProxy(t, target)
	pool, err := database.OpenPostgres(context.Background(), strings.Replace(d.URL, target, proxy.Addr(), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, proxy
}
