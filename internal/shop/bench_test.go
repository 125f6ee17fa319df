package shop_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/logbuf"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

// benchShoppers is how many shoppers (and X-Forwarded-For addresses) the
// request benchmarks spread over, as make bench does.
const benchShoppers = shoptest.BenchShoppers

// benchApp is the application as shop serve runs it under make bench: the
// rate limiter on with a limit nobody reaches, keyed per client through
// X-Forwarded-For from a trusted proxy (app.Handler()'s requests come from
// 0.0.0.0), and log as its logger.
func benchApp(b *testing.B, log *slog.Logger) *shoptest.App {
	return benchAppWith(b, shoptest.Options{Log: log}, nil)
}

// benchAppWith is benchApp on o's stores and logger, with cfg's edits
// (when set) after benchApp's.
func benchAppWith(b *testing.B, o shoptest.Options, cfg func(*config.Config)) *shoptest.App {
	b.Helper()
	o.Config = func(c *config.Config) {
		c.RateLimit = config.RateLimit{Limit: 1 << 30, Window: 10 * time.Second}
		c.TrustedProxies = []string{"0.0.0.0"}
		if cfg != nil {
			cfg(c)
		}
	}
	return shoptest.New(b, o)
}

// privateRedis is a client of a redis-server of the benchmark's own.
func privateRedis(b *testing.B) *redis.Client {
	rs := testenv.StartRedis(b)
	opts, err := redis.ParseURL(rs.URL)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// accessLogs are the loggers the request benchmarks compare: JSON lines
// written to a file line by line (as shop serve wrote them before logbuf),
// the same batched by logbuf (as shop serve writes them), the same lines
// discarded (the formatting alone), and none.
var accessLogs = []struct {
	name string
	log  func(b *testing.B) *slog.Logger
}{
	{"log=file", func(b *testing.B) *slog.Logger {
		f, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = f.Close() })
		return slog.New(slog.NewJSONHandler(f, nil))
	}},
	{"log=buffered", func(b *testing.B) *slog.Logger {
		f, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
		if err != nil {
			b.Fatal(err)
		}
		w := logbuf.New(f, 0, 0)
		b.Cleanup(func() { _ = w.Close(); _ = f.Close() })
		return slog.New(logbuf.Handler(slog.NewJSONHandler(w, nil), w))
	}},
	{"log=discard", func(*testing.B) *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }},
	{"log=off", func(*testing.B) *slog.Logger { return slog.New(slog.DiscardHandler) }},
}

// BenchmarkPurchase is POST /api/v1/products/{sku}/purchase through the
// whole application as shop serve wires it (request id, access log,
// metrics, recover, the limiter with the session check riding in it, the
// reserve script, the 202 body), without a socket: one unit with a fresh
// Idempotency-Key, 200 shoppers, 50 callers. Its allocations are the
// server's per purchase. Results: BENCHMARKS.md.
func BenchmarkPurchase(b *testing.B) {
	for _, l := range accessLogs {
		b.Run(l.name, func(b *testing.B) { benchPurchase(b, benchApp(b, l.log(b))) })
	}
}

// BenchmarkPurchaseOneTrip is BenchmarkPurchase with shop serve's access
// log (batched), the limiter's window, the session check and the
// reservation in one script call (SHOP_REDIS_ONE_TRIP, the default) and
// in two (off), each with and without the auto-pipeliner, on a private
// redis-server so that Redis's own accounting is the purchases' alone:
// scripts/op (EVALSHA and EVAL calls per purchase) and redis-us/op (the
// microseconds Redis spent in them, as INFO commandstats counts).
func BenchmarkPurchaseOneTrip(b *testing.B) {
	for _, pipe := range []bool{true, false} {
		for _, one := range []bool{true, false} {
			b.Run(fmt.Sprintf("pipeline=%v/one_trip=%v", pipe, one), func(b *testing.B) {
				rdb := privateRedis(b)
				a := benchAppWith(b, shoptest.Options{Redis: rdb, Log: accessLogs[1].log(b)}, func(c *config.Config) {
					c.RedisPipeline, c.RedisOneTrip = pipe, one
				})
				calls, usec := scriptStats(b, rdb)
				benchPurchase(b, a)
				calls2, usec2 := scriptStats(b, rdb)
				b.ReportMetric(float64(calls2-calls)/float64(b.N), "scripts/op")
				b.ReportMetric(float64(usec2-usec)/float64(b.N), "redis-us/op")
			})
		}
	}
}

// scriptStats is Redis's count of EVALSHA and EVAL calls and the
// microseconds spent in them (INFO commandstats).
func scriptStats(b *testing.B, rdb *redis.Client) (calls, usec int64) {
	w := readWork(b, rdb)
	for _, cmd := range []string{"evalsha", "eval"} {
		calls += w.byCommand[cmd][0]
		usec += w.byCommand[cmd][1]
	}
	return calls, usec
}

func benchPurchase(b *testing.B, a *shoptest.App) {
	run := shoptest.PurchaseBench(b, a)
	defer cpuPerOp(b)()
	run()
}

// BenchmarkGetProduct is GET /api/v1/products/{sku} of a product with a
// live round through the same application (limiter, visitor count, cache
// hit, live stock), and BenchmarkHealthz is GET /healthz, the bare HTTP
// stack make bench compares it with. Results: BENCHMARKS.md.
func BenchmarkGetProduct(b *testing.B) {
	for _, l := range accessLogs {
		b.Run(l.name, func(b *testing.B) {
			a := benchApp(b, l.log(b))
			a.Sale(b, "bench", 100, 1000, 0)
			benchGet(b, a, "/api/v1/products/bench")
		})
	}
}

// BenchmarkGetProductNear is BenchmarkGetProduct with shop serve's access
// log (batched), the product reads from memory on (no round trip but the
// limiter's) and off (SHOP_NEAR_CACHE_TTL's default: the cached document
// and the live stock from Redis, in the limiter's script call:
// BenchmarkGetProductOneTrip).
func BenchmarkGetProductNear(b *testing.B) {
	for _, ttl := range []time.Duration{time.Second, 0} {
		b.Run(fmt.Sprintf("near=%v", ttl), func(b *testing.B) {
			a := benchAppWith(b, shoptest.Options{Log: accessLogs[1].log(b)}, func(c *config.Config) { c.NearCacheTTL = ttl })
			a.Sale(b, "bench", 100, 1000, 0)
			benchGet(b, a, "/api/v1/products/bench")
		})
	}
}

// BenchmarkGetProductOneTrip is BenchmarkGetProductNear with the product
// reads from memory off, the limiter's window, the cached document and
// the live stock in one script call (SHOP_REDIS_ONE_TRIP, the default)
// and in three round trips (off), on a private redis-server so that its
// accounting is the reads' alone: scripts/op (EVALSHA and EVAL calls
// per read, INFO commandstats) and redis-cpu-us/op (the server's CPU
// time, user and system, INFO cpu); and, counted by a hook on the
// client, sent/op (the commands it sent) and trips/op (its sends: one
// command, or one pipeline of several, such as a batch of the
// auto-pipeliner or of the visitor counts).
func BenchmarkGetProductOneTrip(b *testing.B) {
	for _, one := range []bool{true, false} {
		b.Run(fmt.Sprintf("one_trip=%v", one), func(b *testing.B) {
			rdb := privateRedis(b)
			var sends sendCounter
			rdb.AddHook(&sends)
			a := benchAppWith(b, shoptest.Options{Redis: rdb, Log: accessLogs[1].log(b)}, func(c *config.Config) {
				c.NearCacheTTL, c.RedisOneTrip = 0, one
			})
			a.Sale(b, "bench", 100, 1000, 0)
			calls, _ := scriptStats(b, rdb)
			cpu := serverCPU(b, rdb)
			sent, trips := sends.cmds.Load(), sends.trips.Load()
			benchGet(b, a, "/api/v1/products/bench")
			calls2, _ := scriptStats(b, rdb)
			n := float64(b.N)
			b.ReportMetric(float64(calls2-calls)/n, "scripts/op")
			b.ReportMetric(float64(serverCPU(b, rdb)-cpu)/n/1e3, "redis-cpu-us/op")
			b.ReportMetric(float64(sends.cmds.Load()-sent)/n, "sent/op")
			b.ReportMetric(float64(sends.trips.Load()-trips)/n, "trips/op")
		})
	}
}

// sendCounter counts a client's commands and its sends (a command, or a
// pipeline).
type sendCounter struct{ cmds, trips atomic.Int64 }

func (s *sendCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *sendCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		s.cmds.Add(1)
		s.trips.Add(1)
		return next(ctx, c)
	}
}

func (s *sendCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.cmds.Add(int64(len(cmds)))
		s.trips.Add(1)
		return next(ctx, cmds)
	}
}

// serverCPU is the Redis server's CPU time, user and system (INFO cpu).
func serverCPU(b *testing.B, rdb *redis.Client) time.Duration { return readWork(b, rdb).cpu }

func BenchmarkHealthz(b *testing.B) {
	for _, l := range accessLogs {
		b.Run(l.name, func(b *testing.B) { benchGet(b, benchApp(b, l.log(b)), "/healthz") })
	}
}

func benchGet(b *testing.B, a *shoptest.App, path string) {
	benchRequests(b, a, func(uint64) (string, string, string) { return http.MethodGet, path, "" }, http.StatusOK)
}

// benchRequests runs b.N requests through a's handler, 25 a core at once,
// the nth (from 0) op(n): method, path and Authorization (none when
// empty), each from one of benchShoppers addresses; an answer whose status
// is not one of want fails b.
func benchRequests(b *testing.B, a *shoptest.App, op func(n uint64) (method, path, bearer string), want ...int) {
	var seq atomic.Uint64
	h := a.Fiber.Handler()
	b.ReportAllocs()
	b.SetParallelism(25)
	defer cpuPerOp(b)()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var rc fasthttp.RequestCtx
		for pb.Next() {
			n := seq.Add(1) - 1
			method, path, bearer := op(n)
			// As fasthttp's server does between requests: without it each
			// request's context would wrap the last one's (UserContext
			// lives in the user values), ever deeper.
			rc.ResetUserValues()
			rc.Request.Reset()
			rc.Response.Reset()
			rc.Request.Header.SetMethod(method)
			rc.Request.SetRequestURI(path)
			if bearer != "" {
				rc.Request.Header.Set("Authorization", bearer)
			}
			rc.Request.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.0.%d", n%benchShoppers+1))
			h(&rc)
			if st := rc.Response.StatusCode(); !slices.Contains(want, st) {
				b.Fatalf("status %d: %s", st, rc.Response.Body())
			}
		}
	})
}

// cpuPerOp reports the process's CPU time (user and system) per op from
// the call to the returned function's: on a shared machine, where the wall
// time per op of a parallel benchmark mostly measures waiting (for Redis,
// for the cores), this is what one request costs this process.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
