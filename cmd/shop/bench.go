package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shop-oss/shop/internal/bench"
)

func newBenchCmd(a *app) *cobra.Command {
	cfg := bench.Config{}
	var rates, serverEnv, serverArgs string
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Measure the performance ratios of BENCHMARKS.md on this machine, each against its own baseline in the same run",
		Long: "Start a redis-server of its own from deploy/redis.conf (AOF, appendfsync always), a fresh database " +
			"shop_bench and a private `shop serve` on 127.0.0.1:--port with the rate limiter on, then per run (--runs): " +
			"purchases (`shop loadtest`, one core) against redis-benchmark running the bare reserve script and the minimal " +
			"purchase script; the p99 of purchases at half that rate beside GET /healthz at the same rate, with the server's " +
			"and Redis's own view of the window; a product read against GET /healthz; the same with wrk when installed; " +
			"the plain client (`shop loadtest --procs 0`). Then the order writer's drain against COPY, the ratios side by " +
			"side (medians over the runs) with where the cores went and Redis's commands per purchase, and the hot-path " +
			"Go benchmarks. Run it from the repository (or give --dir): it runs redis-server, redis-benchmark, wrk and " +
			"go test, and reads the scripts there. Loopback only; it stops what it started. Reports go to --out.\n\n" +
			"Every flag also reads the BENCH_* variable named in its help when the flag is not given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Rates, err = intList(rates); err != nil {
				return fmt.Errorf("--rate: %w", err)
			}
			cfg.ServerEnv, cfg.ServerArgs = strings.Fields(serverEnv), strings.Fields(serverArgs)
			if cfg.Bin == "" {
				if cfg.Bin, err = os.Executable(); err != nil {
					return err
				}
			}
			cfg.RedisURL, _ = a.lookup("SHOP_REDIS_URL")
			if cfg.TestDatabaseURL == "" {
				cfg.TestDatabaseURL = cfg.PostgresURL
			}
			cfg.Stdout, cfg.Stderr = a.stdout, a.stderr
			return bench.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	env := benchEnv{f: f, getenv: a.getenv}
	env.int(&cfg.Runs, "runs", "BENCH_RUNS", 1, "runs; the summary prints medians")
	env.duration(&cfg.Duration, "duration", "BENCH_DURATION", 20*time.Second, "each purchase attack at full speed")
	env.duration(&cfg.ReadDuration, "read-duration", "BENCH_READ_DURATION", 10*time.Second, "each read load")
	env.duration(&cfg.RateDuration, "rate-duration", "BENCH_RATE_DURATION", 15*time.Second, "each fixed-rate load: purchases at half rate, /healthz at that rate, --rate")
	env.int(&cfg.BareRequests, "bare-requests", "BENCH_BARE_REQUESTS", 200000, "calls of each bare script through redis-benchmark")
	env.int(&cfg.Connections, "connections", "BENCH_CONNECTIONS", 200, "connections of every client")
	env.int(&cfg.Users, "users", "BENCH_USERS", 200, "shoppers (and X-Forwarded-For addresses)")
	env.int(&cfg.Port, "port", "BENCH_PORT", 18090, "the private server's port (its profiler on the next)")
	env.str(&rates, "rate", "BENCH_RATE", "", `extra fixed rates for a latency table, e.g. "1000 3000 5000"`)
	env.flag(&cfg.Profile, "profile", "BENCH_PROFILE", "the server's CPU profiles of the first purchase attack (10 s) and half-rate attack (8 s), and their tops")
	env.duration(&cfg.ProfileDelay, "profile-delay", "BENCH_PROFILE_DELAY", 2*time.Second, "how long after the purchases begin each profile starts")
	env.flag(&cfg.LoadtestProfile, "loadtest-profile", "BENCH_LOADTEST_PROFILE", "the load generator's own CPU profile of the first attack (loadtest-cpu.pprof)")
	env.flag(&cfg.SkipGo, "skip-go", "BENCH_SKIP_GO", "skip the writer drain and the Go benchmarks")
	env.flag(&cfg.SkipHot, "skip-hot", "BENCH_SKIP_HOT", "skip the hot-path Go benchmarks")
	env.int(&cfg.WriterOrders, "writer-orders", "BENCH_WRITER_ORDERS", 200000, "orders of each writer benchmark")
	env.str(&serverEnv, "server-env", "BENCH_SERVER_ENV", "", `NAME=VALUE words for the server only, e.g. "GOGC=200 SHOP_REDIS_PIPELINE_DELAY=50us"`)
	env.str(&serverArgs, "server-args", "BENCH_SERVER_ARGS", "", `flags of shop serve, e.g. "--linger 10ms"`)
	env.str(&cfg.WriterNice, "writer-nice", "BENCH_WRITER_NICE", "", "run the order writer as a process of its own (shop writer) at this nice value")
	env.str(&cfg.LogLevel, "server-log-level", "BENCH_LOG_LEVEL", "info", "the server's SHOP_LOG_LEVEL")
	env.str(&cfg.RedisFsync, "redis-fsync", "BENCH_REDIS_FSYNC", "always", "the own redis-server's appendfsync; shared: the machine's Redis as found (--shared-redis-url). $SHOP_REDIS_URL, when set, is used as found")
	env.int(&cfg.RedisPort, "redis-port", "BENCH_REDIS_PORT", 0, "the own redis-server's port (0: --port + 9)")
	env.str(&cfg.RedisDir, "redis-dir", "BENCH_REDIS_DIR", "", "where the own redis-server keeps its AOF (default under --out; /dev/shm shows the disk's share of the tail, an experiment only)")
	env.str(&cfg.SharedRedis, "shared-redis-url", "BENCH_SHARED_REDIS_URL", "redis://127.0.0.1:6379/0", "the machine's Redis, for --redis-fsync shared")
	env.str(&cfg.PostgresURL, "postgres-url", "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "a PostgreSQL admin URL: shop_bench is created and dropped there")
	env.str(&cfg.TestRedisURL, "test-redis-url", "SHOP_TEST_REDIS_URL", "redis://127.0.0.1:6379/1", "the Go benchmarks' Redis")
	env.str(&cfg.TestDatabaseURL, "test-database-url", "SHOP_TEST_DATABASE_URL", "", "the Go benchmarks' PostgreSQL (default --postgres-url)")
	readsSettings(cmd, []string{"SHOP_REDIS_URL"})
	f.StringVar(&cfg.Dir, "dir", ".", "the shop repository")
	f.StringVar(&cfg.Bin, "bin", "", "the shop binary the server and load generator run from (default this one)")
	f.StringVar(&cfg.Out, "out", ".run/bench", "where the reports go (under --dir unless absolute)")
	return cmd
}

// benchEnv registers a flag whose default is its BENCH_* variable's
// value when that is set.
type benchEnv struct {
	f      *pflag.FlagSet
	getenv func(string) string
}

func (e benchEnv) lookup(name string) string {
	if e.getenv == nil {
		return ""
	}
	return e.getenv(name)
}

func (e benchEnv) usage(variable, usage string) string { return usage + " ($" + variable + ")" }

func (e benchEnv) int(p *int, name, variable string, def int, usage string) {
	if v, err := strconv.Atoi(e.lookup(variable)); err == nil {
		def = v
	}
	e.f.IntVar(p, name, def, e.usage(variable, usage))
}

func (e benchEnv) str(p *string, name, variable, def, usage string) {
	if v := e.lookup(variable); v != "" {
		def = v
	}
	e.f.StringVar(p, name, def, e.usage(variable, usage))
}

// duration also reads a bare number as seconds (BENCH_PROFILE_DELAY=2).
func (e benchEnv) duration(p *time.Duration, name, variable string, def time.Duration, usage string) {
	v := e.lookup(variable)
	if d, err := time.ParseDuration(v); err == nil {
		def = d
	} else if s, err := strconv.ParseFloat(v, 64); err == nil {
		def = time.Duration(s * float64(time.Second))
	}
	e.f.DurationVar(p, name, def, e.usage(variable, usage))
}

// flag is on by default when its variable is set (BENCH_PROFILE=1).
func (e benchEnv) flag(p *bool, name, variable, usage string) {
	v := e.lookup(variable)
	e.f.BoolVar(p, name, v != "" && v != "0", e.usage(variable, usage))
}

// intList reads "1000 3000 5000" (spaces or commas).
func intList(s string) ([]int, error) {
	var out []int
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		n, err := strconv.Atoi(w)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a rate", w)
		}
		out = append(out, n)
	}
	return out, nil
}
