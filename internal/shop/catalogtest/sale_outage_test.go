package catalogtest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/inventory"
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
	pool, proxy := testenv.NewProxiedDatabase(t)
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
	rs, rdb, _, in := pausableInstance(t)
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

// roundRows are sku's recorded rounds, oldest first, as "id:quantity:opened".
func roundRows(t *testing.T, db *pgxpool.Pool, sku string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT id || ':' || quantity || ':' || (opened_at IS NOT NULL) FROM sale_rounds WHERE sku = $1 ORDER BY id`, sku)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A seeding refused during a Redis hang leaves its row not opened; the
// retries that follow converge on that row (a 503 while the refused
// seeding could still apply, then the row taken over) instead of adding a
// round per attempt, and Redis and PostgreSQL agree on the live round.
func TestSeedRetryAfterRedisHangConverges(t *testing.T) {
	t.Parallel()
	rs, rdb, st, in := pausableInstance(t)
	in.create(t, "hang-3", "c", 100)
	first := in.seed(t, "hang-3", `{"quantity":10}`)

	// Redis hangs once the round is recorded (before, the session check
	// would refuse the request with nothing recorded).
	in.Sales.InjectAfterRecord(func() {
		in.Sales.InjectAfterRecord(nil)
		rs.Pause(t)
	})
	in.do(t, http.MethodPut, "/api/v1/admin/products/hang-3/stock", `{"quantity":99}`).
		problem(t, http.StatusServiceUnavailable, "unavailable")
	rs.Resume(t)
	refused := fmt.Sprintf("%d:99:false", *first.RoundID+1)
	if got := roundRows(t, st.db, "hang-3"); !slices.Equal(got, []string{fmt.Sprintf("%d:10:true", *first.RoundID), refused}) {
		t.Fatalf("rounds after the 503: %v, want the refused one not opened", got)
	}

	// Retries, with another quantity, until one is answered.
	var rep inventory.StockReport
	for deadline := time.Now().Add(3 * stockBound); ; {
		r := in.do(t, http.MethodPut, "/api/v1/admin/products/hang-3/stock", `{"quantity":50}`)
		if r.status == http.StatusOK {
			rep = r.stockReport(t)
			break
		}
		r.problem(t, http.StatusServiceUnavailable, "unavailable")
		if time.Now().After(deadline) {
			t.Fatal("the retries never converged")
		}
		time.Sleep(500 * time.Millisecond)
	}
	want := []string{fmt.Sprintf("%d:10:true", *first.RoundID), fmt.Sprintf("%d:50:true", *first.RoundID+1)}
	if got := roundRows(t, st.db, "hang-3"); !slices.Equal(got, want) || *rep.RoundID != *first.RoundID+1 || rep.Available != 50 {
		t.Fatalf("after the retry: rounds %v, report %+v; want %v and the second round live with 50", got, rep, want)
	}
	if live, _ := rdb.HGet(context.Background(), in.Config.KeyPrefix+"sale:{hang-3}", "round").Int64(); live != *rep.RoundID {
		t.Fatalf("Redis's live round %d, PostgreSQL's %d", live, *rep.RoundID)
	}
}

// A round that went live but whose answer was lost (its opened mark is
// missing): a retry of the same seeding answers that round, adding none;
// another seeding adds a new round as usual.
func TestSeedRetryAfterLostAnswerConverges(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "lost-1", "c", 100)
	first := in.seed(t, "lost-1", `{"quantity":10,"per_user_limit":2}`)
	if _, err := st.db.Exec(context.Background(), `UPDATE sale_rounds SET opened_at = NULL WHERE id = $1`, *first.RoundID); err != nil {
		t.Fatal(err)
	}
	again := in.seed(t, "lost-1", `{"quantity":10,"per_user_limit":2}`)
	if *again.RoundID != *first.RoundID || again.Quantity != 10 {
		t.Fatalf("retry answered %+v, want round %d", again, *first.RoundID)
	}
	if got := roundRows(t, st.db, "lost-1"); !slices.Equal(got, []string{fmt.Sprintf("%d:10:true", *first.RoundID)}) {
		t.Fatalf("rounds after the retry: %v", got)
	}
	next := in.seed(t, "lost-1", `{"quantity":7}`)
	if *next.RoundID == *first.RoundID || next.Available != 7 {
		t.Fatalf("a new seeding answered %+v, want a new round", next)
	}
}

// pausableRedis is a private redis-server the test may pause (SIGSTOP),
// and a client opened on it as `shop serve` opens one.
func pausableRedis(t *testing.T) (*testenv.RedisProcess, redis.UniversalClient) {
	t.Helper()
	rs := testenv.StartRedis(t)
	rdb, err := database.OpenRedis(context.Background(), rs.URL, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rs, rdb
}

// pausableInstance is an instance on the test's stores but for Redis, a
// pausableRedis: the Redis process, its client, the stores and the
// instance.
func pausableInstance(t *testing.T) (*testenv.RedisProcess, redis.UniversalClient, stores, *instance) {
	t.Helper()
	rs, rdb := pausableRedis(t)
	st := newStores(t)
	st.rdb = rdb
	return rs, rdb, st, newInstance(t, st)
}
