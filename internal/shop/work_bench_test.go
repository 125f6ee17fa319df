package shop_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/shop"
	"github.com/shop-oss/shop/internal/shop/shoptest"
	"github.com/shop-oss/shop/internal/testenv"
)

// workRate is the rate BenchmarkPurchaseWork offers its purchases at:
// moderate, where a purchase costs most (issue 47: nothing batches), and
// one this host keeps up with whatever else runs.
const workRate = 500

// BenchmarkPurchaseWork counts what a purchase in service costs, in units
// a noisy host cannot blur: b.N one-unit purchases, offered at a fixed
// moderate rate (workRate, or SHOP_BENCH_WORK_RATE per second) through
// the whole application as shop serve wires it, persisted by an order
// writer running beside it, on a redis-server of the benchmark's own set
// as deploy/redis.conf says (AOF, appendfsync always). Per purchase:
//
//   - redis-cmds/op: the commands Redis ran (INFO commandstats), a
//     script's own commands counted and the script call not;
//     redis-scripts/op: the script calls;
//   - redis-cpu-us/op: Redis's CPU time, user and system (INFO cpu);
//   - aof-bytes/op: what the AOF grew by (aof_current_size);
//   - trips/op: the application's sends to Redis (a command, or a
//     pipeline), the request's and the writer's;
//   - go-cpu-us/op: this process's CPU time: the server and the writer
//     (the benchmark's own client is a function call, no socket).
//
// The background loops of an instance (the sweeper, the admitter, the
// live stock) run meanwhile and count too, as they do in service. The
// per-command table (calls and µs per purchase) is logged.
func BenchmarkPurchaseWork(b *testing.B) {
	rate := workRate
	if v, err := strconv.Atoi(os.Getenv("SHOP_BENCH_WORK_RATE")); err == nil && v > 0 {
		rate = v
	}
	rs := testenv.StartRedis(b, "--appendonly", "yes", "--appendfsync", "always",
		"--auto-aof-rewrite-min-size", "1gb", "--maxmemory", "2gb", "--maxmemory-policy", "noeviction")
	opts, err := redis.ParseURL(rs.URL)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	app := redis.NewClient(opts) // the application's, whose sends are counted
	b.Cleanup(func() { _ = app.Close() })
	var sends sendCounter
	app.AddHook(&sends)
	// shop serve's own key prefix: key names are most of the AOF's bytes,
	// and this Redis is the benchmark's alone.
	a := benchAppWith(b, shoptest.Options{Redis: app, Log: accessLogs[1].log(b)},
		func(c *config.Config) { c.KeyPrefix = "shop:" })
	purchase := pacedPurchases(b, a)
	wctx, stopWriter := context.WithCancel(context.Background())
	// As shop serve runs it, on the application's client, with its flags'
	// defaults (cmd/shop/writer.go): the linger is what batches orders at
	// a moderate rate.
	w := writer.New(a.DB.Pool, app, a.Config.KeyPrefix, a.Log, prometheus.NewRegistry(), writer.Options{
		Consumer: "work", Batch: 1000, Concurrency: 3, Linger: 50 * time.Millisecond,
		AfterCommit: shop.AfterCommit(a.Bestsellers), AfterTransition: shop.AfterTransition(a.Bestsellers),
		Partitions: a.Config.Partitions()})
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() {
		stopWriter()
		<-wdone
	}()
	stream := orderkey.Streams(a.Config.KeyPrefix, a.Config.Partitions())[0]

	aof, aofFrom := aofFile(b, rdb)
	before := readWork(b, rdb)
	trips, cpu := sends.trips.Load(), cpuTime(b)
	b.ResetTimer()
	purchase(b.N, rate)
	waitPersisted(b, a, rdb, stream, b.N)
	b.StopTimer()
	after := readWork(b, rdb)
	n := float64(b.N)
	b.ReportMetric(float64(after.cmds-before.cmds)/n, "redis-cmds/op")
	b.ReportMetric(float64(after.scripts-before.scripts)/n, "redis-scripts/op")
	b.ReportMetric(float64(after.cpu-before.cpu)/n/1e3, "redis-cpu-us/op")
	b.ReportMetric(float64(after.aof-before.aof)/n, "aof-bytes/op")
	b.ReportMetric(float64(sends.trips.Load()-trips)/n, "trips/op")
	b.ReportMetric(float64(cpuTime(b)-cpu)/n/1e3, "go-cpu-us/op")
	if b.N >= 100 { // not the probe run of one
		b.Logf("%d purchases at %d/s; Redis's commands per purchase:\n%s", b.N, rate, commandTable(before, after, n))
		b.Logf("what each purchase appends to the AOF, by command and key:\n%s", aofTable(b, aof, aofFrom, n))
	}
}

// pacedPurchases sets up a sale as PurchaseBench does and returns a
// function that offers n purchases at rate per second, from a ticker
// every 10 ms, to callers enough for the rate; every one must answer 202.
func pacedPurchases(b *testing.B, a *shoptest.App) func(n, rate int) {
	a.Sale(b, "bench", 100, 1<<30, 0)
	bearers := make([]string, shoptest.BenchShoppers)
	for i := range bearers {
		_, tok := a.Shopper(b, fmt.Sprintf("work-%d@example.com", i))
		bearers[i] = "Bearer " + tok
	}
	h := a.Fiber.Handler()
	body := []byte(`{"quantity":1}`)
	return func(n, rate int) {
		var seq atomic.Uint64
		offers := make(chan struct{}, rate)
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rc fasthttp.RequestCtx
				for range offers {
					k := seq.Add(1)
					i := k % shoptest.BenchShoppers
					shoptest.PurchaseRequest(&rc, bearers[i], fmt.Sprintf("198.18.%d.%d", (i+1)/256, (i+1)%256),
						"w"+strconv.FormatUint(k, 36), body)
					h(&rc)
					if rc.Response.StatusCode() != http.StatusAccepted {
						b.Errorf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
					}
				}
			}()
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for sent := 0; sent < n; {
			<-tick.C
			due := min(n, int(time.Since(start).Seconds()*float64(rate)))
			for ; sent < due; sent++ {
				offers <- struct{}{}
			}
		}
		close(offers)
		wg.Wait()
	}
}

// waitPersisted waits until PostgreSQL holds n orders and stream's group
// has acknowledged every entry it read (the writer's confirm is part of
// a purchase's cost).
func waitPersisted(b *testing.B, a *shoptest.App, rdb *redis.Client, stream string, n int) {
	ctx := context.Background()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var rows int
		var groups []redis.XInfoGroup
		err := a.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&rows)
		if err == nil && rows >= n {
			// Only now, so that the wait adds a call or two to the counts.
			groups, err = rdb.XInfoGroups(ctx, stream).Result()
			if err == nil && len(groups) == 1 && groups[0].Pending == 0 && groups[0].Lag == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d orders persisted; the stream's groups: %v %v", rows, n, groups, err)
		}
	}
}

// work is Redis's account of itself at one moment.
type work struct {
	cmds, scripts int64
	cpu           time.Duration
	aof           int64
	byCommand     map[string][2]int64 // calls, µs
}

// readWork reads INFO's commandstats, cpu and persistence sections. The
// benchmark's own INFO calls, and the script calls, are left out of cmds.
func readWork(b *testing.B, rdb *redis.Client) work {
	info, err := rdb.Info(context.Background(), "commandstats", "cpu", "persistence").Result()
	if err != nil {
		b.Fatal(err)
	}
	w := work{byCommand: map[string][2]int64{}}
	var cpuSecs float64
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		switch {
		case !ok:
		case name == "used_cpu_sys" || name == "used_cpu_user":
			f, _ := strconv.ParseFloat(rest, 64)
			cpuSecs += f
		case name == "aof_current_size":
			w.aof, _ = strconv.ParseInt(rest, 10, 64)
		case strings.HasPrefix(name, "cmdstat_"):
			cmd := strings.TrimPrefix(name, "cmdstat_")
			var calls, usec int64
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "calls":
					calls, _ = strconv.ParseInt(v, 10, 64)
				case "usec":
					usec, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			w.byCommand[cmd] = [2]int64{calls, usec}
			switch cmd {
			case "info":
			case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall":
				w.scripts += calls
			default:
				w.cmds += calls
			}
		}
	}
	w.cpu = time.Duration(cpuSecs * float64(time.Second))
	return w
}

// commandTable lists each command's calls and µs per purchase between
// two readings, most µs first.
func commandTable(before, after work, n float64) string {
	type row struct {
		cmd         string
		calls, usec float64
	}
	var rows []row
	for cmd, a := range after.byCommand {
		p := before.byCommand[cmd]
		if dc := a[0] - p[0]; dc > 0 && cmd != "info" {
			rows = append(rows, row{cmd, float64(dc) / n, float64(a[1]-p[1]) / n})
		}
	}
	slices.SortFunc(rows, func(x, y row) int {
		switch {
		case x.usec > y.usec:
			return -1
		case x.usec < y.usec:
			return 1
		}
		return strings.Compare(x.cmd, y.cmd)
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-22s %8s %8s\n", "command", "calls", "µs")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-22s %8.3f %8.2f\n", r.cmd, r.calls, r.usec)
	}
	return sb.String()
}

// BenchmarkTrips counts the Redis round trips (trips/op: a command, or a
// pipeline) and the commands (sent/op) the application sends for one
// request of each route on the purchase path, as shop serve wires it with
// the limiter on: a hook on its client counts them, around each request
// alone, so the host's load cannot blur them. The requests go one at a
// time; the instance's background loops, which run meanwhile, add about
// 0.03 a request here.
func BenchmarkTrips(b *testing.B) {
	rdb := privateRedis(b)
	var sends sendCounter
	rdb.AddHook(&sends)
	a := benchAppWith(b, shoptest.Options{Redis: rdb, Log: accessLogs[1].log(b)}, nil)
	a.Sale(b, "bench", 100, 1<<30, 0)
	a.RoomSale(b, "roomed", 100, 1<<30, 0)
	_, token := a.Shopper(b, "trips@example.com")
	h := a.Fiber.Handler()
	var seq atomic.Uint64
	do := func(method, path, token, body string, want int) {
		var rc fasthttp.RequestCtx
		rc.Request.Header.SetMethod(method)
		rc.Request.SetRequestURI(path)
		rc.Request.Header.Set("X-Forwarded-For", "198.18.0.1")
		if token != "" {
			rc.Request.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			rc.Request.Header.Set("Content-Type", "application/json")
			rc.Request.Header.Set("Idempotency-Key", "t"+strconv.FormatUint(seq.Add(1), 36))
			rc.Request.SetBody([]byte(body))
		}
		h(&rc)
		if rc.Response.StatusCode() != want {
			b.Fatalf("%s %s: %d %s, want %d", method, path, rc.Response.StatusCode(), rc.Response.Body(), want)
		}
	}
	var shoppers atomic.Int64
	for _, r := range []struct {
		name    string
		prepare func() (token string) // not counted
		request func(token string)
	}{
		{"product-read", nil, func(string) { do(http.MethodGet, "/api/v1/products/bench", "", "", 200) }},
		{"product-read-signed-in", nil, func(string) { do(http.MethodGet, "/api/v1/products/bench", token, "", 200) }},
		{"purchase", nil, func(string) {
			do(http.MethodPost, "/api/v1/products/bench/purchase", token, `{"quantity":1}`, 202)
		}},
		{"cart-add", nil, func(string) { do(http.MethodPost, "/api/v1/cart/items", token, `{"sku":"bench","quantity":1}`, 200) }},
		{"checkout", func() string {
			do(http.MethodPost, "/api/v1/cart/items", token, `{"sku":"bench","quantity":1}`, 200)
			return token
		}, func(string) { do(http.MethodPost, "/api/v1/cart/checkout", token, `{}`, 202) }},
		{"queue-first-join", func() string {
			_, t := a.Shopper(b, fmt.Sprintf("joiner-%d@example.com", shoppers.Add(1)))
			return t
		}, func(t string) { do(http.MethodPost, "/api/v1/products/roomed/queue", t, `{}`, 201) }},
		{"queue-ticket", nil, func(string) { do(http.MethodGet, "/api/v1/products/roomed/queue", token, "", 200) }},
	} {
		if r.name == "queue-ticket" {
			do(http.MethodPost, "/api/v1/products/roomed/queue", token, `{}`, 201)
		}
		b.Run(r.name, func(b *testing.B) {
			var trips, sent int64
			for range b.N {
				t := ""
				if r.prepare != nil {
					t = r.prepare()
				}
				t0, s0 := sends.trips.Load(), sends.cmds.Load()
				r.request(t)
				trips += sends.trips.Load() - t0
				sent += sends.cmds.Load() - s0
			}
			b.ReportMetric(float64(trips)/float64(b.N), "trips/op")
			b.ReportMetric(float64(sent)/float64(b.N), "sent/op")
		})
	}
}
