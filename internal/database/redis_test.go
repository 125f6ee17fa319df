package database_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/outage"
	"github.com/shop-oss/shop/internal/testenv"
)

// warnings is a logger that counts its warnings.
type warnings struct{ buf bytes.Buffer }

func (w *warnings) logger() *slog.Logger { return slog.New(slog.NewTextHandler(&w.buf, nil)) }
func (w *warnings) count() int           { return strings.Count(w.buf.String(), "level=WARN") }

func client(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestCheckNoEvictionAcceptsNoeviction(t *testing.T) {
	t.Parallel()
	// Only reads the shared Redis's configuration (noeviction, Redis's default).
	r := testenv.NewRedis(t)
	var w warnings
	if err := database.CheckNoEviction(context.Background(), r.Client, w.logger()); err != nil {
		t.Fatalf("shared test Redis: %v", err)
	}
	if w.count() != 0 {
		t.Errorf("logged %q", w.buf.String())
	}
}

func TestCheckNoEvictionRefusesEvictingPolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t, testenv.RedisServer(t, "--maxmemory-policy", "allkeys-lru"))
	// allkeys-lru is set at start, the others by CONFIG SET on this private server.
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "allkeys-lfu", "allkeys-random",
		"volatile-lfu", "volatile-random", "volatile-ttl"} {
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		err := database.CheckNoEviction(ctx, rdb, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "maxmemory-policy "+policy+",") ||
			!strings.Contains(err.Error(), "set maxmemory-policy noeviction") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line naming the policy and the fix", policy, err)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := database.CheckNoEviction(ctx, rdb, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("noeviction: %v", err)
	}
}

func TestCheckNoEvictionWarnsWhenConfigIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Both servers evict: a refused CONFIG hides it, and the check lets the
	// shop start with a warning rather than lock out managed Redis.
	renamed := func(t *testing.T) *redis.Client {
		return client(t, testenv.RedisServer(t, "--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""))
	}
	aclDenied := func(t *testing.T) *redis.Client {
		url := testenv.RedisServer(t, "--maxmemory-policy", "allkeys-lru")
		if err := client(t, url).Do(ctx, "ACL", "SETUSER", "shop", "on", ">secret", "~*", "&*", "+@all", "-config").Err(); err != nil {
			t.Fatal(err)
		}
		return client(t, strings.Replace(url, "redis://", "redis://shop:secret@", 1))
	}
	for name, open := range map[string]func(*testing.T) *redis.Client{"renamed": renamed, "acl": aclDenied} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb := open(t)
			if err := rdb.ConfigGet(ctx, "maxmemory-policy").Err(); err == nil {
				t.Fatal("CONFIG GET answered; the test set-up is wrong")
			}
			var w warnings
			if err := database.CheckNoEviction(ctx, rdb, w.logger()); err != nil {
				t.Fatalf("err = %v, want a warning only", err)
			}
			if w.count() != 1 || !strings.Contains(w.buf.String(), "could not verify") {
				t.Errorf("logged %q, want one warning", w.buf.String())
			}
		})
	}
}

func TestCheckNoEvictionFailsWhenRedisDoesNotAnswer(t *testing.T) {
	t.Parallel()
	// Only a refusal by Redis itself may pass with a warning.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	if err := database.CheckNoEviction(context.Background(), rdb, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("passed without an answer")
	}
}

// A command whose reply is lost to a reset connection must come back as an
// error, not be sent again: resent, a reservation or an XREADGROUP would
// happen twice. The INCR below runs once, whatever the client says.
func TestOpenRedisNeverResendsACommand(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	proxy := testenv.NewProxy(t, r.Client.Options().Addr)
	url := strings.Replace(r.URL, r.Client.Options().Addr, proxy.Addr(), 1)
	rdb, err := database.OpenRedis(context.Background(), url, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	key := r.Prefix + "counter"

	proxy.Blackhole(true)
	go func() {
		time.Sleep(300 * time.Millisecond) // the INCR has run; its reply is lost
		proxy.Blackhole(false)             // and the connection is reset
	}()
	if err := rdb.Incr(context.Background(), key).Err(); err == nil {
		t.Fatal("INCR reported success though its reply was lost")
	}
	if n, _ := r.Client.Get(context.Background(), key).Int(); n != 1 {
		t.Fatalf("the counter is %d: the INCR ran %d times", n, n)
	}
}

// A call's context deadline bounds it on a stalled Redis (SIGSTOP: the
// connection is open, nothing answers): go-redis would otherwise wait for
// its 2 s ReadTimeout whatever the caller's timeout.
func TestOpenRedisHonoursCallDeadlines(t *testing.T) {
	t.Parallel()
	rs := testenv.StartRedis(t)
	rdb, err := database.OpenRedis(context.Background(), rs.URL, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	rs.Pause(t)
	const timeout = 200 * time.Millisecond
	for _, name := range []string{"pooled connection", "second call"} {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		start := time.Now()
		err := rdb.Get(ctx, "k").Err()
		d := time.Since(start)
		cancel()
		if !outage.Is(err) {
			t.Errorf("%s: err = %v, want an outage", name, err)
		}
		if d > 3*timeout {
			t.Errorf("%s: took %s with a %s deadline", name, d, timeout)
		}
	}
}

// A Redis without its append-only file loses accepted orders on a restart:
// one warning line, naming the setting; none with AOF on, none when CONFIG
// is refused (CheckNoEviction's warning already says so).
func TestWarnWithoutAOF(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		args  []string
		warns int
	}{
		{"appendonly_no", nil, 1},
		{"appendonly_yes", []string{"--appendonly", "yes"}, 0},
		{"config_refused", []string{"--rename-command", "CONFIG", ""}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w warnings
			database.WarnWithoutAOF(context.Background(), client(t, testenv.RedisServer(t, tc.args...)), w.logger())
			if w.count() != tc.warns || strings.Count(w.buf.String(), "\n") != tc.warns ||
				(tc.warns > 0 && !strings.Contains(w.buf.String(), "appendonly no")) {
				t.Errorf("logged %q, want %d warning line(s) naming appendonly", w.buf.String(), tc.warns)
			}
		})
	}
}
