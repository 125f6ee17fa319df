// Package bench is `shop bench`: the performance ratios of BENCHMARKS.md,
// each measured against its own baseline in the same run on this machine
// (purchases against the bare reserve script, their p99 at half rate
// against /healthz, a product read against /healthz, the order writer's
// drain against COPY), where the cores went meanwhile, and the hot-path
// Go benchmarks. It owns the bench's private Redis, database and server
// and stops what it started; the load comes from `shop loadtest`.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config is one bench run's settings (the command's flags).
type Config struct {
	Dir          string // the repository: deploy/redis.conf, the scripts, the Go benchmarks
	Bin          string // the shop binary the server and the load generator run from
	Out          string // reports, under Dir unless absolute
	Runs         int
	Duration     time.Duration // each purchase attack at full speed
	ReadDuration time.Duration // each read load
	RateDuration time.Duration // each fixed-rate load (half rate, /healthz at it)
	BareRequests int           // each bare script's calls through redis-benchmark
	Connections  int
	Users        int
	Port         int
	Rates        []int // extra fixed rates for a latency table

	Profile         bool          // the server's CPU profiles of run 1's attacks
	ProfileDelay    time.Duration // after the purchases begin
	LoadtestProfile bool          // the load generator's own profile of the first attack
	SkipGo, SkipHot bool
	WriterOrders    int

	ServerEnv  []string // NAME=VALUE, the server's only
	ServerArgs []string
	WriterNice string // the order writer as a `shop writer` of its own at this nice value
	LogLevel   string

	RedisURL    string // a Redis to use as found (SHOP_REDIS_URL)
	RedisFsync  string // the own redis-server's appendfsync, or "shared"
	RedisPort   int
	RedisDir    string
	SharedRedis string // the machine's Redis, for RedisFsync "shared"
	PostgresURL string // an admin URL: the bench creates and drops shop_bench

	TestRedisURL, TestDatabaseURL string // for the Go benchmarks

	Stdout, Stderr io.Writer
}

// bench is one run's state: what it started and what it measured.
type bench struct {
	cfg        Config
	out, warn  io.Writer
	prefix     string // every key this run writes starts with it
	redisURL   string
	redisDesc  string
	redisDir   string
	ownRedis   bool
	rhost      string
	rport      string
	rdbNum     int
	rdb        *redis.Client
	slowSaved  []string
	dbURL      string
	secret     string
	server     *exec.Cmd
	writer     *exec.Cmd
	sampler    *sampler
	haveWrk    bool
	loadStart  string
	stealStart float64

	results
}

// Run runs the whole bench: every phase of every run, the summary, then
// the Go benchmarks.
func Run(ctx context.Context, cfg Config) error {
	b, err := newBench(cfg)
	if err != nil {
		return err
	}
	defer b.cleanup()
	if err := b.startRedis(ctx); err != nil {
		return err
	}
	b.header(ctx)
	if err := b.startServer(ctx); err != nil {
		return err
	}
	b.sampler = startSampler()
	b.runs(ctx)
	if ctx.Err() != nil {
		return ctx.Err() // interrupted: the deferred cleanup stops what was started
	}
	b.rateTable(ctx)
	b.profileTops(ctx)
	b.cpu = cpuReport(b.sampler.Stop(), b.phases, clockTicks, b.serverPids())
	b.sampler = nil
	b.stopServer()
	if !cfg.SkipGo {
		b.writerDrain(ctx)
	}
	if err := b.summary(); err != nil {
		return err
	}
	if cfg.SkipGo || cfg.SkipHot {
		return ctx.Err()
	}
	b.hotPaths(ctx)
	return ctx.Err()
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux this runs on.
const clockTicks = 100

func newBench(cfg Config) (*bench, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "deploy", "redis.conf")); err != nil {
		return nil, fmt.Errorf("bench: %s is not the shop repository (no deploy/redis.conf): run it from there or give --dir", dir)
	}
	cfg.Dir = dir
	for _, tool := range []string{"redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("bench: %s is required (apt-get install redis-server redis-tools)", tool)
		}
	}
	if !filepath.IsAbs(cfg.Out) {
		cfg.Out = filepath.Join(dir, cfg.Out)
	}
	if cfg.PostgresURL == "" {
		return nil, fmt.Errorf("bench: need PostgreSQL (--postgres-url; make run starts one)")
	}
	if cfg.Runs < 1 {
		return nil, fmt.Errorf("bench: --runs must be 1 or more")
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	if err := clearReports(cfg.Out); err != nil {
		return nil, err
	}
	return &bench{cfg: cfg, out: cfg.Stdout, warn: cfg.Stderr, prefix: fmt.Sprintf("shopbench:%d:", os.Getpid())}, nil
}

// clearReports removes the last run's reports, leaving the directory.
func clearReports(out string) error {
	for _, pat := range []string{"*.json", "*.csv", "*.txt", "*.pprof", "*.log"} {
		old, _ := filepath.Glob(filepath.Join(out, pat))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) path(name string) string { return filepath.Join(b.cfg.Out, name) }

func (b *bench) printf(format string, args ...any) { fmt.Fprintf(b.out, format, args...) }

func (b *bench) warnf(format string, args ...any) {
	fmt.Fprintf(b.warn, "bench: "+format+"\n", args...)
}

// now is the wall clock in epoch seconds, the phases' and samples' unit.
func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }
