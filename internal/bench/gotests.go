package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// goTest runs `go test` in the repository with the test stores, printing
// the lines keep passes; all its output also goes to tee when given.
func (b *bench) goTest(ctx context.Context, env []string, tee string, keep func(string) bool, args ...string) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"test"}, args...)...)
	cmd.Dir = b.cfg.Dir
	cmd.Env = append(os.Environ(), "SHOP_TEST_REDIS_URL="+b.cfg.TestRedisURL, "SHOP_TEST_DATABASE_URL="+b.cfg.TestDatabaseURL)
	cmd.Env = append(cmd.Env, env...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		b.warnf("go test: %v", err)
		return
	}
	cmd.Stderr = cmd.Stdout
	var all io.Writer = io.Discard
	if tee != "" {
		f, err := os.Create(b.path(tee))
		if err == nil {
			defer f.Close()
			all = f
		}
	}
	if err := cmd.Start(); err != nil {
		b.warnf("go test: %v", err)
		return
	}
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(all, line)
		if keep(line) {
			b.printf("%s\n", line)
		}
	}
	_ = cmd.Wait() // a failing benchmark prints its FAIL line above
}

var benchLine = regexp.MustCompile(`^(Benchmark|ok|FAIL)`)

func benchLines(line string) bool { return benchLine.MatchString(line) }

// writerDrain is the order writer's drain against a COPY of the same
// orders and items into the same tables, in one `go test`.
func (b *bench) writerDrain(ctx context.Context) {
	c := b.cfg
	b.printf("\n== order writer: go test -run '^$' -bench 'WriterDrain$|WriterCopy$' -benchtime %dx -count %d ./internal/order/writer\n",
		c.WriterOrders, c.Runs)
	b.goTest(ctx, nil, "writer.txt", benchLines, "-run", "^$", "-bench", "WriterDrain$|WriterCopy$",
		"-benchtime", strconv.Itoa(c.WriterOrders)+"x", "-count", strconv.Itoa(c.Runs), "-timeout", "30m", "./internal/order/writer")
	raw, _ := os.ReadFile(b.path("writer.txt"))
	b.drain, b.copy = writerRates(string(raw))
}

// writerRates reads the orders/s of each BenchmarkWriterDrain and
// BenchmarkWriterCopy line.
func writerRates(text string) (drain, copy []float64) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "BenchmarkWriter") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(f[0], "BenchmarkWriter"), "-")
		for i := 1; i+1 < len(f); i++ {
			if f[i+1] != "orders/s" {
				continue
			}
			switch name {
			case "Drain":
				drain = append(drain, float(f[i]))
			case "Copy":
				copy = append(copy, float(f[i]))
			}
		}
	}
	return drain, copy
}

// hotPaths are the Go benchmarks of the purchase path, the work per
// purchase, the round trips per route, the waiting room, the stock
// events and the idle live streams.
func (b *bench) hotPaths(ctx context.Context) {
	runs := strconv.Itoa(b.cfg.Runs)
	hot := "Reserve$|Allow$|VerifyToken$|AuthenticatedRequest|GetProductCached$|ProductJSON$|ValidCode$|ParseBatch$|Purchase$|GetProduct$|Healthz$"
	b.printf("\n== hot paths: go test -run '^$' -bench '%s' -benchtime 3s -benchmem\n", hot)
	b.goTest(ctx, nil, "", benchLines, "-run", "^$", "-bench", hot, "-benchtime", "3s", "-benchmem", "-timeout", "10m",
		"./internal/order", "./internal/order/writer", "./internal/inventory", "./internal/shop/catalogtest",
		"./internal/ratelimit", "./internal/auth", "./internal/onetrip", "./internal/shop")

	b.printf("\n== work per purchase (issue 47): go test -v -run '^$' -bench PurchaseWork -benchtime 5000x -count %s ./internal/shop "+
		"(at 500/s, AOF always; Redis's commands, CPU and AOF bytes, the app's trips and CPU, per purchase)\n", runs)
	noise := regexp.MustCompile(`^(goos|goarch|pkg|cpu|PASS)|testdbconf`)
	b.goTest(ctx, nil, "", func(l string) bool { return !noise.MatchString(l) },
		"-v", "-run", "^$", "-bench", "PurchaseWork", "-benchtime", "5000x", "-count", runs, "-timeout", "10m", "./internal/shop")

	b.printf("\n== Redis round trips per request, by route (issue 47): go test -run '^$' -bench Trips -benchtime 2000x ./internal/shop\n")
	b.goTest(ctx, nil, "", benchLines, "-run", "^$", "-bench", "Trips", "-benchtime", "2000x", "-timeout", "10m", "./internal/shop")

	b.printf("\n== waiting room: go test -run '^$' -bench 'Room$' -benchtime 3s -count %s ./internal/shop (a join and a ticket read against a product read, one run)\n", runs)
	b.goTest(ctx, nil, "", benchLines, "-run", "^$", "-bench", "Room$", "-benchtime", "3s", "-count", runs, "-timeout", "10m", "./internal/shop")

	b.printf("\n== stock events on the purchase path: go test -run '^$' -bench ReserveEvents -benchtime 3s ./internal/order (off / PUBLISH in the script / async queue)\n")
	b.goTest(ctx, nil, "", benchLines, "-run", "^$", "-bench", "ReserveEvents", "-benchtime", "3s", "-timeout", "10m", "./internal/order")

	b.printf("\n== idle live streams: SHOP_LIVE_IDLE_STREAMS=10000 go test -run TestLiveIdleStreamCost -v ./e2e (memory and CPU per stream)\n")
	streams := os.Getenv("SHOP_LIVE_IDLE_STREAMS")
	if streams == "" {
		streams = "10000"
	}
	b.goTest(ctx, []string{"SHOP_LIVE_IDLE_STREAMS=" + streams}, "", func(l string) bool {
		return (strings.Contains(l, "idle streams") || strings.HasPrefix(l, "ok") || strings.HasPrefix(l, "FAIL")) &&
			!strings.Contains(l, "live_cost_test")
	}, "-count=1", "-run", "TestLiveIdleStreamCost", "-v", "-timeout", "10m", "./e2e")
}
