package outage_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/outage"
	"github.com/shop-oss/shop/internal/testenv"
)

// outageCase makes one real error, from a real server put in the state
// the name says, and tells whether it is an outage.
type outageCase struct {
	name   string
	outage bool
	make   func(t *testing.T) error
}

// Every error comes from a real server where one can be made to fail
// that way on this machine: private redis-servers stopped, paused,
// filled, replicas without a primary, a cluster node without slots, and
// PostgreSQL behind a proxy that refuses or stops forwarding. Each is
// also checked wrapped, as callers wrap them.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	cases := append(redisCases(), postgresCases()...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := c.make(t)
			if err == nil && c.outage {
				t.Fatal("the server did not fail; the set-up is wrong")
			}
			t.Logf("%T: %v", err, err)
			wrapped := fmt.Errorf("outer op: %w", fmt.Errorf("inner op: %w", err))
			for _, e := range []error{err, wrapped} {
				if got := outage.Is(e); got != c.outage {
					t.Errorf("Unavailable(%v) = %v, want %v", e, got, c.outage)
				}
			}
		})
	}
}

func redisCases() []outageCase {
	ctx := context.Background()
	return []outageCase{
		{"redis_stopped", true, func(t *testing.T) error {
			rs := testenv.StartRedis(t)
			rdb := newClient(t, rs.URL)
			rs.Kill()
			return rdb.Get(ctx, "k").Err()
		}},
		{"redis_paused", true, func(t *testing.T) error {
			rs := testenv.StartRedis(t)
			rdb := newClient(t, rs.URL)
			rs.Pause(t)
			return rdb.Get(ctx, "k").Err()
		}},
		{"redis_debug_sleep", true, func(t *testing.T) error {
			url := testenv.RedisServer(t, "--enable-debug-command", "yes")
			sleeper, rdb := newClient(t, url), newClient(t, url)
			go sleeper.Do(context.WithoutCancel(ctx), "DEBUG", "SLEEP", "1.5")
			time.Sleep(200 * time.Millisecond)
			return rdb.Get(ctx, "k").Err()
		}},
		{"redis_busy_script", true, busyScript},
		{"redis_oom", true, func(t *testing.T) error {
			return newClient(t, fullRedis(t)).Set(ctx, "k", "v", 0).Err()
		}},
		{"redis_oom_in_multi", true, func(t *testing.T) error {
			cmds, err := multiHSet(newClient(t, fullRedis(t)))
			return outage.TxError(cmds, err)
		}},
		// Without TxError an EXECABORT does not say why Redis refused it,
		// and is not taken for an outage.
		{"redis_execabort_without_its_cause", false, func(t *testing.T) error {
			_, err := multiHSet(newClient(t, fullRedis(t)))
			return err
		}},
		{"redis_oom_in_script", true, func(t *testing.T) error {
			return newClient(t, fullRedis(t)).Eval(ctx, "return redis.call('SET', KEYS[1], 'v')", []string{"k"}).Err()
		}},
		{"redis_masterdown", true, func(t *testing.T) error {
			url := testenv.RedisServer(t, "--replicaof", "127.0.0.1", "1", "--replica-serve-stale-data", "no")
			return newClient(t, url).Get(ctx, "k").Err()
		}},
		{"redis_readonly_replica", true, func(t *testing.T) error {
			return newClient(t, testenv.RedisServer(t, "--replicaof", "127.0.0.1", "1")).Set(ctx, "k", "v", 0).Err()
		}},
		{"redis_clusterdown", true, func(t *testing.T) error {
			return newClient(t, testenv.RedisServer(t, "--cluster-enabled", "yes")).Get(ctx, "k").Err()
		}},
		// A reshard cannot be staged on one node; a script hands back
		// Redis's TRYAGAIN reply verbatim, through the same reply parser.
		{"redis_tryagain", true, func(t *testing.T) error {
			return newClient(t, testenv.RedisServer(t)).
				Eval(ctx, "return redis.error_reply('TRYAGAIN Multiple keys request during rehashing of slot')", nil).Err()
		}},
		// A node of a cluster asked, without redirects, for a key of
		// another's slot answers MOVED (as a cluster client that ran out
		// of redirects hands it on), and ASK during a migration.
		{"redis_moved", true, func(t *testing.T) error {
			c := testenv.StartCluster(t, 3)
			for _, m := range c.Masters {
				err := newClient(t, m.URL).Get(ctx, "k").Err()
				if err != nil && strings.HasPrefix(err.Error(), "MOVED ") {
					return err
				}
			}
			t.Fatal("no master answered MOVED for a key of another's slot")
			return nil
		}},
		{"redis_ask", true, func(t *testing.T) error {
			return newClient(t, testenv.RedisServer(t)).
				Eval(ctx, "return redis.error_reply('ASK 3999 127.0.0.1:6381')", nil).Err()
		}},
		{"redis_loading", true, loadingRedis},
		{"redis_client_closed", true, func(t *testing.T) error {
			rdb := newClient(t, testenv.RedisServer(t))
			_ = rdb.Close()
			return rdb.Get(ctx, "k").Err()
		}},
		{"redis_lua_error", false, func(t *testing.T) error {
			return newClient(t, testenv.RedisServer(t)).Eval(ctx, "return redis.call('NOSUCHCOMMAND')", nil).Err()
		}},
		{"redis_lua_syntax_error", false, func(t *testing.T) error {
			return newClient(t, testenv.RedisServer(t)).Eval(ctx, "return 1 +", nil).Err()
		}},
		{"redis_wrong_arity", false, func(t *testing.T) error {
			return newClient(t, testenv.RedisServer(t)).Do(ctx, "GET").Err()
		}},
		{"redis_wrong_arity_in_multi", false, func(t *testing.T) error {
			cmds, err := newClient(t, testenv.RedisServer(t)).TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "HSET", "k")
				p.PExpire(ctx, "k", time.Minute)
				return nil
			})
			return outage.TxError(cmds, err)
		}},
		{"redis_wrongtype", false, func(t *testing.T) error {
			rdb := newClient(t, testenv.RedisServer(t))
			rdb.Set(ctx, "k", "v", 0)
			return rdb.HGet(ctx, "k", "f").Err()
		}},
		{"redis_busygroup", false, func(t *testing.T) error {
			rdb := newClient(t, testenv.RedisServer(t))
			rdb.XGroupCreateMkStream(ctx, "s", "g", "0")
			return rdb.XGroupCreateMkStream(ctx, "s", "g", "0").Err()
		}},
		{"redis_nil", false, func(t *testing.T) error {
			return newClient(t, testenv.RedisServer(t)).Get(ctx, "missing").Err()
		}},
	}
}

// newClient is a client without retries whose reads give up after 300ms.
func newClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries, opts.ReadTimeout, opts.DialTimeout = -1, 300*time.Millisecond, 300*time.Millisecond
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// fullRedis is a private Redis already over its maxmemory (1 byte),
// refusing writes as production Redis does (noeviction).
func fullRedis(t *testing.T) string {
	return testenv.RedisServer(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction")
}

func multiHSet(rdb *redis.Client) ([]redis.Cmder, error) {
	ctx := context.Background()
	return rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, "k", "f", "v")
		p.PExpire(ctx, "k", time.Minute)
		return nil
	})
}

// busyScript runs a script past busy-reply-threshold: meanwhile Redis
// answers every other client BUSY. The script only reads, so SCRIPT KILL
// ends it.
func busyScript(t *testing.T) error {
	ctx := context.Background()
	url := testenv.RedisServer(t, "--busy-reply-threshold", "100")
	looper := newClient(t, url)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		looper.Do(ctx, "EVAL", "#!lua flags=no-writes\nwhile true do end", "0")
	}()
	time.Sleep(300 * time.Millisecond)
	rdb := newClient(t, url)
	err := rdb.Get(ctx, "k").Err()
	for range 50 {
		if rdb.Do(ctx, "SCRIPT", "KILL").Err() == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	return err
}

// loadingRedis restarts a private Redis on a snapshot it loads slowly
// (key-load-delay, in microseconds per key, answering other clients every
// KiB read: 10 s in all) and asks it while it loads. A loading server
// answers slowly, hence the long read timeout; the client speaks RESP2
// without CLIENT SETINFO, as a handshake of several commands would wait
// out the load.
func loadingRedis(t *testing.T) error {
	ctx := context.Background()
	rs := testenv.StartRedis(t, "--key-load-delay", "50000", "--loading-process-events-interval-bytes", "1024")
	rdb := newClient(t, rs.URL)
	for i := range 200 {
		rdb.Set(ctx, "k"+strconv.Itoa(i), strings.Repeat("v", 1024), 0)
	}
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rs.Kill()
	opts, _ := redis.ParseURL(rs.URL)
	opts.Protocol, opts.DisableIdentity, opts.MaxRetries, opts.ReadTimeout = 2, true, -1, 2*time.Second
	rdb = redis.NewClient(opts)
	defer rdb.Close()
	restarted := make(chan error, 1)
	go func() { restarted <- rs.Restart() }()
	defer func() { rs.Kill(); <-restarted }()
	var last error
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if last = rdb.Get(ctx, "k1").Err(); redis.IsLoadingError(last) {
			return last
		}
	}
	t.Fatalf("Redis never answered LOADING while it loaded; last: %v", last)
	return nil
}

func postgresCases() []outageCase {
	ctx := context.Background()
	return []outageCase{
		{"postgres_refused", true, func(t *testing.T) error {
			db, proxy := proxiedPool(t)
			proxy.Down()
			db.Reset()
			return db.Ping(ctx)
		}},
		{"postgres_stalled", true, func(t *testing.T) error {
			db, proxy := proxiedPool(t)
			proxy.Stall(true)
			t.Cleanup(func() { proxy.Stall(false) }) // before the pool closes
			qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, err := db.Exec(qctx, "SELECT 1")
			return err
		}},
		{"postgres_connection_terminated", true, func(t *testing.T) error {
			db := testenv.NewDatabase(t).Pool
			conn, err := db.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			pid := conn.Conn().PgConn().PID()
			if _, err := db.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			_, err = conn.Exec(ctx, "SELECT 1")
			return err
		}},
		{"postgres_statement_timeout", true, func(t *testing.T) error {
			tx, err := testenv.NewDatabase(t).Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			tx.Exec(ctx, "SET LOCAL statement_timeout = 50")
			_, err = tx.Exec(ctx, "SELECT pg_sleep(5)")
			return err
		}},
		{"postgres_pool_closed", true, func(t *testing.T) error {
			db, err := pgxpool.New(ctx, testenv.NewDatabase(t).URL)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			_, err = db.Exec(ctx, "SELECT 1")
			return err
		}},
		// Not made on the shared server, whose limits and state are not
		// ours to change; the codes are those PostgreSQL sends.
		{"postgres_too_many_clients_53300", true, func(*testing.T) error {
			return &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: "sorry, too many clients already"}
		}},
		{"postgres_starting_up_57P03", true, func(*testing.T) error {
			return &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"}
		}},
		{"postgres_syntax_error", false, sqlError("SELEC 1")},
		{"postgres_unknown_column", false, sqlError("SELECT no_such_column FROM products")},
		{"postgres_bad_input", false, sqlError("SELECT 'x'::int")},
		{"postgres_unique_violation", false, sqlError("CREATE TEMP TABLE u (id int PRIMARY KEY); INSERT INTO u VALUES (1), (1)")},
		{"postgres_no_rows", false, func(t *testing.T) error {
			var n int
			return testenv.NewDatabase(t).Pool.QueryRow(ctx, "SELECT 1 WHERE false").Scan(&n)
		}},
		{"postgres_wrong_arity", false, func(t *testing.T) error {
			_, err := testenv.NewDatabase(t).Pool.Exec(ctx, "SELECT $1::int", 1, 2)
			return err
		}},
	}
}

func sqlError(sql string) func(t *testing.T) error {
	return func(t *testing.T) error {
		conn, err := pgx.Connect(context.Background(), testenv.NewDatabase(t).URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), sql, pgx.QueryExecModeSimpleProtocol)
		return err
	}
}

// proxiedPool is a pool on a fresh test database through a proxy.
func proxiedPool(t *testing.T) (*pgxpool.Pool, *testenv.Proxy) {
	t.Helper()
	d := testenv.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(proxy.Addr())
	url := strings.Replace(d.URL, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))), net.JoinHostPort(host, port), 1)
	cfg, err = pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = time.Second
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, proxy
}
