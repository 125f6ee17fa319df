package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// startRedis starts the bench's own redis-server from deploy/redis.conf,
// the production settings (the AOF with appendfsync always), so every
// write pays its fsync here as there; or uses the Redis it was given.
func (b *bench) startRedis(ctx context.Context) error {
	c := b.cfg
	switch {
	case c.RedisURL != "":
		b.redisURL, b.redisDesc = c.RedisURL, "as SHOP_REDIS_URL has it"
	case c.RedisFsync == "shared":
		if c.SharedRedis == "" {
			return errors.New("bench: --redis-fsync shared needs the machine's Redis (--shared-redis-url)")
		}
		b.redisURL, b.redisDesc = c.SharedRedis, "the machine's Redis as found"
	default:
		if err := b.ownRedisServer(ctx); err != nil {
			return err
		}
	}
	opt, err := redis.ParseURL(b.redisURL)
	if err != nil {
		return fmt.Errorf("bench: redis url: %w", err)
	}
	b.rhost, b.rport, err = net.SplitHostPort(opt.Addr)
	if err != nil {
		return fmt.Errorf("bench: redis address: %w", err)
	}
	b.rdbNum = opt.DB
	b.rdb = redis.NewClient(opt)
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("bench: redis at %s: %w", opt.Addr, err)
	}
	return nil
}

func (b *bench) ownRedisServer(ctx context.Context) error {
	c := b.cfg
	port := c.RedisPort
	if port == 0 {
		port = c.Port + 9
	}
	logDir := b.path("redis")
	b.redisDir = logDir
	if c.RedisDir != "" {
		b.redisDir = filepath.Join(c.RedisDir, "shop-bench-redis")
	}
	for _, d := range []string{logDir, b.redisDir} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	fsync := c.RedisFsync
	cmd := exec.CommandContext(ctx, "redis-server", filepath.Join(c.Dir, "deploy", "redis.conf"), "--daemonize", "yes",
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", b.redisDir, "--save", "",
		"--appendfsync", fsync, "--logfile", filepath.Join(logDir, "redis.log"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: redis-server: %v: %s", err, strings.TrimSpace(string(out)))
	}
	b.ownRedis = true
	b.redisURL = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	if !waitPort(fmt.Sprintf("127.0.0.1:%d", port), 10*time.Second) {
		return fmt.Errorf("bench: redis-server on %d did not start", port)
	}
	b.redisDesc = "its own, deploy/redis.conf with appendfsync " + fsync
	if c.RedisDir != "" {
		b.redisDesc += ", its AOF in " + c.RedisDir
	}
	return nil
}

func waitPort(addr string, within time.Duration) bool {
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return true
		}
	}
	return false
}

// dropDatabase drops shop_bench through the admin URL.
func (b *bench) dropDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("bench: postgres: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS shop_bench")
	return err
}

// benchDB is the admin URL with the database shop_bench.
func benchDB(admin string) (string, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", fmt.Errorf("bench: postgres url: %w", err)
	}
	u.Path = "/shop_bench"
	return u.String(), nil
}

// commits is PostgreSQL's transactions committed in shop_bench so far.
func (b *bench) commits(ctx context.Context) float64 {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return 0
	}
	defer conn.Close(ctx)
	var n int64
	if conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n) != nil {
		return 0
	}
	return float64(n)
}

func (b *bench) commandStats(ctx context.Context) map[string]cmdStat {
	s, err := b.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil
	}
	return parseCommandStats(s)
}

func (b *bench) persistence(ctx context.Context) map[string]string {
	s, _ := b.rdb.Info(ctx, "persistence").Result()
	return parseInfo(s)
}

func (b *bench) aofRewrites(ctx context.Context) int {
	n, _ := strconv.Atoi(b.persistence(ctx)["aof_rewrites"])
	return n
}

// aofSettle rewrites the own Redis's AOF now and waits for the rewrite to
// end, so the next phase starts with a fresh AOF and Redis's automatic
// rewrite (from 1gb, deploy/redis.conf) does not fall in its seconds: a
// rewrite forks and writes the whole dataset while every fsync waits,
// and took one phase's p99 to 434 ms.
func (b *bench) aofSettle(ctx context.Context) {
	if !b.ownRedis {
		return
	}
	_ = b.rdb.BgRewriteAOF(ctx).Err() // one already running is as good
	for range 1200 {
		p := b.persistence(ctx)
		if p["aof_rewrite_in_progress"] == "0" && p["aof_rewrite_scheduled"] == "0" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.warnf("the AOF rewrite before a phase did not end in 120 s")
}

// rewritesSince notes a phase that saw an automatic AOF rewrite all the
// same (n: aof_rewrites before it).
func (b *bench) rewritesSince(ctx context.Context, n int, name string, run int) {
	if !b.ownRedis {
		return
	}
	if d := b.aofRewrites(ctx) - n; d > 0 {
		b.rewrites = append(b.rewrites, fmt.Sprintf("%d %s %d", run, name, d))
		b.printf("   (an automatic AOF rewrite fell in %s)\n", name)
	}
}

// windowStart sets Redis's slow log to every command over 1 ms, empty,
// and returns its commandstats (cumulative: nothing is reset on a shared
// Redis). The settings are restored after the window and on exit.
func (b *bench) windowStart(ctx context.Context) map[string]cmdStat {
	if b.slowSaved == nil {
		a, _ := b.rdb.ConfigGet(ctx, "slowlog-log-slower-than").Result()
		m, _ := b.rdb.ConfigGet(ctx, "slowlog-max-len").Result()
		b.slowSaved = []string{a["slowlog-log-slower-than"], m["slowlog-max-len"]}
	}
	b.rdb.ConfigSet(ctx, "slowlog-log-slower-than", "1000")
	b.rdb.ConfigSet(ctx, "slowlog-max-len", "100000")
	b.rdb.Do(ctx, "slowlog", "reset")
	return b.commandStats(ctx)
}

func (b *bench) windowRestore(ctx context.Context) {
	if b.slowSaved == nil || b.rdb == nil {
		return
	}
	if b.slowSaved[0] != "" {
		b.rdb.ConfigSet(ctx, "slowlog-log-slower-than", b.slowSaved[0])
	}
	if b.slowSaved[1] != "" {
		b.rdb.ConfigSet(ctx, "slowlog-max-len", b.slowSaved[1])
	}
	b.rdb.Do(ctx, "slowlog", "reset")
}

// windowEnd is Redis's own clock on the window: a script of ~130 µs of
// work that took 5 ms had Redis's one thread descheduled meanwhile. Only
// the slow entries of the attack's seconds (from..to) count; each goes
// to slowlog-RUN-PHASE.txt.
func (b *bench) windowEnd(ctx context.Context, before map[string]cmdStat, run int, name string, from, to float64) {
	after := b.commandStats(ctx)
	logs, _ := b.rdb.SlowLogGet(ctx, 100000).Result()
	b.windowRestore(ctx)
	var slow []slowEntry
	var lines strings.Builder
	for _, l := range logs {
		if len(l.Args) == 0 {
			continue
		}
		e := slowEntry{command: strings.ToLower(l.Args[0]), at: l.Time.Unix(), usec: float64(l.Duration.Microseconds())}
		slow = append(slow, e)
		if e.at >= int64(from) && e.at <= int64(to) {
			fmt.Fprintf(&lines, "%s %.0f\n", e.command, e.usec)
		}
	}
	_ = os.WriteFile(b.path(fmt.Sprintf("slowlog-%d-%s.txt", run, name)), []byte(lines.String()), 0o644)
	if t, ok := tailOf(name, before, after, slow, int64(from), int64(to)); ok {
		b.tails = append(b.tails, t)
	}
}

// unlinkPrefix removes every key under a prefix.
func (b *bench) unlinkPrefix(ctx context.Context, prefix string) {
	it := b.rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
		if len(keys) == 500 {
			b.rdb.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		b.rdb.Unlink(ctx, keys...)
	}
}

// cleanup stops what the bench started and removes what it wrote.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.sampler.Stop()
	b.windowRestore(ctx)
	b.stopServer()
	if b.rdb != nil {
		if b.ownRedis {
			// A client of its own that does not retry: the connection
			// closes as Redis stops.
			opt := *b.rdb.Options()
			opt.MaxRetries, opt.DialerRetries = -1, 1
			c := redis.NewClient(&opt)
			_ = c.ShutdownNoSave(ctx).Err()
			_ = c.Close()
			if b.cfg.RedisDir != "" {
				_ = os.RemoveAll(b.redisDir)
			}
		} else {
			b.unlinkPrefix(ctx, b.prefix)
		}
		_ = b.rdb.Close()
	}
	if b.cfg.PostgresURL != "" {
		_ = b.dropDatabase(ctx)
	}
}
