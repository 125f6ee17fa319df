package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/testenv"
)

// TestBenchCluster is `make bench-cluster` (scripts/bench-cluster.sh),
// skipped unless SHOP_BENCH_CLUSTER=1: the purchase throughput of the same
// binary on a plain Redis, a 1-master cluster and a 3-master cluster, in
// one run, each setup in turn on its own private redis-servers (AOF on,
// appendfsync always, as deploy/redis.conf and testenv.StartCluster) and
// its own database, the others stopped meanwhile. For each setup:
//
//  1. one `shop serve` (with its order writer), BENCH_SKUS SKUs spread over
//     every master (stock that never runs out, no per-user limit) and
//     BENCH_USERS shoppers;
//  2. BENCH_CONNECTIONS workers buy for BENCH_DURATION over keep-alive
//     connections, each purchase one unit of the next SKU with its own
//     Idempotency-Key: accepted purchases/s, p50 and p99, and each master's
//     CPU (INFO cpu, user + sys) over the attack, which says how busy the
//     Redis side was;
//  3. the Redis side alone: redis-benchmark running the reserve script the
//     server runs (internal/order/reserve.lua, the `shop bench` call with every
//     key tagged to one slot of the master) on every master at once,
//     BENCH_RB_CLIENTS clients each: script calls/s per master and summed.
//
// Every figure is printed in one table at the end; BENCH_RUNS rounds
// alternate the order of the setups and print every round.
func TestBenchCluster(t *testing.T) {
	cfg := benchLoad(t, "SHOP_BENCH_CLUSTER", "make bench-cluster", 15*time.Second, 64, 48)
	cfg.rbClient, cfg.rbN = benchInt(t, "BENCH_RB_CLIENTS", 50), benchInt(t, "BENCH_RB_REQUESTS", 50000)
	runs := benchInt(t, "BENCH_RUNS", 1)
	setups := []int{0, 1, 3} // masters; 0: a plain Redis
	var results []benchResult
	var hot []hotResult
	for run := range runs {
		order := slices.Clone(setups)
		hotOrder := []int{1, 3} // one hot SKU's buckets
		if run%2 == 1 {
			slices.Reverse(order)
			slices.Reverse(hotOrder)
		}
		for _, m := range order {
			t.Run(benchName(m), func(t *testing.T) {
				r := benchSetup(t, cfg, m)
				r.run = run + 1
				results = append(results, r)
			})
		}
		for _, b := range hotOrder {
			t.Run("hot buckets "+strconv.Itoa(b), func(t *testing.T) { hot = append(hot, benchHot(t, cfg, b)) })
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n== purchases over %d SKUs: %d connections, %s, %d shoppers; redis-benchmark -c %d -n %d per master\n",
		cfg.skus, cfg.conns, cfg.duration, cfg.users, cfg.rbClient, cfg.rbN)
	fmt.Fprintf(&out, "%-4s %-18s %12s %9s %9s %8s  %-22s %14s  %s\n",
		"run", "setup", "purchases/s", "p50 ms", "p99 ms", "non-202", "master CPU (cores)", "script/s sum", "script/s per master")
	for _, r := range results {
		fmt.Fprintf(&out, "%-4d %-18s %12.0f %9.2f %9.2f %8d  %-22s %14.0f  %s\n", r.run, benchName(r.masters), r.perSec,
			ms(r.p50), ms(r.p99), r.other, floats(r.cpu, "%.2f"), sum(r.script), floats(r.script, "%.0f"))
	}
	out.WriteString(hotTable(cfg, hot))
	fmt.Fprintf(&out, "load average at the end: %s\n", loadavg())
	fmt.Print(out.String()) // with -v: scripts/bench-cluster.sh
}

// benchLoad skips t unless flag=1 (a benchmark that target runs), and
// reads the load's knobs: BENCH_DURATION, BENCH_CONNECTIONS, BENCH_SKUS
// and BENCH_USERS (200 shoppers unless set).
func benchLoad(t *testing.T, flag, target string, d time.Duration, conns, skus int) benchConfig {
	if os.Getenv(flag) != "1" {
		t.Skip("a benchmark: " + target + " (" + flag + "=1)")
	}
	return benchConfig{duration: benchDuration(t, "BENCH_DURATION", d), conns: benchInt(t, "BENCH_CONNECTIONS", conns),
		skus: benchInt(t, "BENCH_SKUS", skus), users: benchInt(t, "BENCH_USERS", 200)}
}

type benchConfig struct {
	duration                          time.Duration
	conns, skus, users, rbClient, rbN int
}

type benchResult struct {
	run, masters int
	perSec       float64
	accepted     int64
	p50, p99     time.Duration
	other        int64
	cpu, script  []float64 // per master
}

func benchName(masters int) string {
	if masters == 0 {
		return "single Redis"
	}
	return fmt.Sprintf("cluster %d master%s", masters, map[bool]string{true: "s"}[masters > 1])
}

// benchSetup starts the setup with masters masters (0: a plain Redis),
// its server and shoppers, and measures it.
func benchSetup(t *testing.T, cfg benchConfig, masters int) benchResult {
	var e env
	var nodes []string // the masters' redis:// URLs
	var skus []string
	if masters == 0 {
		rp := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction")
		e = newEnv(t)
		e["SHOP_REDIS_URL"], e["SHOP_KEY_PREFIX"] = rp.URL, "bench:"
		nodes = []string{rp.URL}
		for i := range cfg.skus {
			skus = append(skus, "bench-"+strconv.Itoa(i))
		}
	} else {
		var c *testenv.RedisCluster
		e, c = clusterEnv(t, masters)
		for _, m := range c.Masters {
			nodes = append(nodes, m.URL)
		}
		skus = spreadSKUs(t, c, "bench", cfg.skus)
	}
	s := newShop(t, e)
	for _, sku := range skus {
		s.product(t, sku, 100, map[string]any{"quantity": 10_000_000, "per_user_limit": 0})
	}
	tokens := s.shoppers(t, cfg.users, "bench")

	before := cpuOf(t, nodes)
	r := purchaseLoad(t, s, cfg, skus, tokens)
	after := cpuOf(t, nodes)
	for i := range nodes {
		r.cpu = append(r.cpu, (after[i]-before[i])/cfg.duration.Seconds())
	}
	r.masters = masters
	r.script = scriptCapacity(t, cfg, nodes, masters > 0)
	if r.other > 0 {
		t.Errorf("%s: %d purchases not answered 202 (the figures are not a purchase throughput; see the server's log)", benchName(masters), r.other)
	}
	var sold int64
	for _, sku := range skus {
		sold += s.stock(t, sku).Sold
	}
	// Every accepted purchase was sold once; one that failed may have
	// sold too (a timeout).
	if sold < r.accepted || sold > r.accepted+r.other {
		t.Errorf("%s: %d units sold, %d purchases accepted and %d not", benchName(masters), sold, r.accepted, r.other)
	}
	return r
}

// purchaseLoad runs cfg.conns workers buying for cfg.duration, worker w
// as shoppers w, w+conns, ... in turn, over SKUs in turn.
func purchaseLoad(t *testing.T, s *shop, cfg benchConfig, skus, tokens []string) benchResult {
	body := []byte(`{"quantity":1}`)
	return postLoad(s, cfg, http.StatusAccepted, func(w, i int) (string, string, []byte, bool) {
		return "/products/" + skus[(w+i)%len(skus)] + "/purchase", tokens[(w+i*cfg.conns)%len(tokens)], body, true
	})
}

// postLoad runs cfg.conns workers posting for cfg.duration (or until
// next has no more): next says worker w's i-th request, path (under the
// API), token and body; an answer want counts as done.
func postLoad(s *shop, cfg benchConfig, want int, next func(w, i int) (path, token string, body []byte, ok bool)) benchResult {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: cfg.conns, MaxIdleConnsPerHost: cfg.conns, IdleConnTimeout: time.Minute,
	}}
	defer client.CloseIdleConnections()
	var accepted, other atomic.Int64
	lat := make([][]time.Duration, cfg.conns)
	start := time.Now()
	end := start.Add(cfg.duration)
	var wg sync.WaitGroup
	for w := range cfg.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				path, tok, body, ok := next(w, i)
				if !ok {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, s.api+path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Idempotency-Key", fmt.Sprintf("b%d-%d", w, i))
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == want {
					accepted.Add(1)
					lat[w] = append(lat[w], time.Since(t0))
				} else {
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	took := min(time.Since(start), cfg.duration)
	r := benchResult{perSec: float64(accepted.Load()) / took.Seconds(), accepted: accepted.Load(), other: other.Load()}
	if len(all) > 0 {
		r.p50, r.p99 = all[len(all)/2], all[len(all)*99/100]
	}
	return r
}

// cpuOf is each node's CPU seconds so far (INFO cpu: used_cpu_user +
// used_cpu_sys).
func cpuOf(t *testing.T, nodes []string) []float64 {
	var out []float64
	for _, u := range nodes {
		info, err := client(t, u).Info(context.Background(), "cpu").Result()
		if err != nil {
			t.Fatal(err)
		}
		var total float64
		for _, line := range strings.Split(info, "\r\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "used_cpu_user" || k == "used_cpu_sys" {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
		out = append(out, total)
	}
	return out
}

// scriptCapacity runs redis-benchmark of the reserve script on every node
// at once and returns each one's calls/s. On a cluster every key of a
// node's calls carries one tag of a slot that node holds.
func scriptCapacity(t *testing.T, cfg benchConfig, nodes []string, cluster bool) []float64 {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		t.Log("no redis-benchmark on PATH: the Redis side is not measured")
		return nil
	}
	src := order.ReserveLua()
	out := make([]float64, len(nodes))
	var wg sync.WaitGroup
	for i, u := range nodes {
		rdb := client(t, u)
		tag := "{rb}"
		if cluster {
			tag = tagOn(t, rdb)
		}
		pre := "rbench:" + tag + ":"
		ctx := context.Background()
		sha, err := rdb.ScriptLoad(ctx, src).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, pre+"sale:{rb}", "round", 1, "quantity", 1_000_000_000_000, "available", 1_000_000_000_000,
			"limit", 0, "starts_ms", 0, "ends_ms", 0, "price_cents", 100).Err(); err != nil {
			t.Fatal(err)
		}
		keys := []string{pre + "orders", pre + "order:__rand_int__", pre + "orders:pending:{__rand_int__}",
			pre + "idem:{__rand_int__}:__rand_int__", pre + "nocart", pre + "orders:due", pre + "sale:{rb}", pre + "sale:{rb}:buyers"}
		argv := []string{"__rand_int__", "__rand_int__", "604800000", "86400000", "1", "0", "900000", "0", "1", "rb", "1", pre + "sale:{rb}:changed"}
		// One call first: a script that refuses the call must not be
		// measured as fast.
		probe := strings.NewReplacer("__rand_int__", "1")
		args := []any{"EVALSHA", sha, len(keys)}
		for _, k := range append(slices.Clone(keys), argv...) {
			args = append(args, probe.Replace(k))
		}
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("the reserve script on %s: %v", u, err)
		}
		host, port, _ := strings.Cut(addrOf(t, u), ":")
		cmd := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(cfg.rbClient), "-n", strconv.Itoa(cfg.rbN),
			"-r", "1000000000", "--csv", "EVALSHA", sha, strconv.Itoa(len(keys))}, keys...)
		cmd = append(cmd, argv...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := exec.Command("redis-benchmark", cmd...).Output()
			if err != nil {
				t.Errorf("redis-benchmark on %s: %v", u, err)
				return
			}
			// "test","rps",...: the second line's second field.
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) >= 2 {
				f := strings.Split(lines[1], ",")
				if len(f) >= 2 {
					out[i], _ = strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// tagOn is a hash tag whose slot the node behind rdb holds.
func tagOn(t *testing.T, rdb *redis.Client) string {
	slots, err := testenv.ClusterSlots(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	me := rdb.Options().Addr
	for i := 0; i < 100000; i++ {
		tag := "rb" + strconv.Itoa(i)
		slot := keyspace.Slot("{" + tag + "}")
		for _, s := range slots {
			if slot >= int(s.Start) && slot <= int(s.End) && s.Nodes[0].Addr == me {
				return "{" + tag + "}"
			}
		}
	}
	t.Fatalf("no tag on %s", me)
	return ""
}

func benchInt(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", name, v)
		}
		return n
	}
	return def
}

func benchDuration(t *testing.T, name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("%s=%q: want a duration of 1s or more", name, v)
		}
		return d
	}
	return def
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

func floats(v []float64, f string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(f, x)
	}
	b, _ := json.Marshal(parts)
	return strings.ReplaceAll(strings.Trim(string(b), "[]"), `"`, "")
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:min(3, len(strings.Fields(string(b))))], " ")
}
