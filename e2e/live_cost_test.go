package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What idle live stock streams cost the server, per stream: memory (RSS
// and Go heap) and CPU over 30 s of keep-alives. A measurement, not a
// check: it runs only when SHOP_LIVE_IDLE_STREAMS names how many streams
// to open (`shop bench` opens 10,000), and logs the figures that
// BENCHMARKS.md quotes. The streams are raw connections that read and
// discard, so the client's own cost stays out of the server's figures.
func TestLiveIdleStreamCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SHOP_LIVE_IDLE_STREAMS"))
	if n <= 0 {
		t.Skip("set SHOP_LIVE_IDLE_STREAMS=10000 to measure")
	}
	e := newEnv(t)
	e["SHOP_LIVE_MAX_STREAMS"] = strconv.Itoa(n + 10)
	e["SHOP_LIVE_MAX_STREAMS_PER_IP"] = strconv.Itoa(n + 10)
	s := newShop(t, e)
	s.product(t, "idle", 100, map[string]any{"quantity": 10})
	pid := s.cmd.Process.Pid
	time.Sleep(2 * time.Second)
	rss0, cpu0, heap0 := rss(t, pid), cpuTime(t, pid), metricValue(t, s.URL, "go_memstats_heap_inuse_bytes")
	for range n {
		idleStream(t, s.URL, "idle")
	}
	deadline := time.Now().Add(2 * time.Minute)
	for metricValue(t, s.URL, "shop_live_streams") < float64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("only %v of %d streams open", metricValue(t, s.URL, "shop_live_streams"), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	rss1, cpu1, heap1 := rss(t, pid), cpuTime(t, pid), metricValue(t, s.URL, "go_memstats_heap_inuse_bytes")
	const idle = 30 * time.Second
	time.Sleep(idle)
	cpu2 := cpuTime(t, pid)
	report := fmt.Sprintf("%d idle streams: RSS +%.1f MiB (%.1f KiB each), Go heap in use +%.1f MiB (%.1f KiB each), "+
		"CPU to open them %.2f s (%.0f µs each), idle CPU %.2f%% of a core (%.2f µs/s each, keep-alive every 10 s)",
		n, mib(rss1-rss0), kib(rss1-rss0)/float64(n), mib(int64(heap1-heap0)), kib(int64(heap1-heap0))/float64(n),
		(cpu1 - cpu0).Seconds(), float64((cpu1-cpu0).Microseconds())/float64(n),
		100*(cpu2-cpu1).Seconds()/idle.Seconds(), float64((cpu2-cpu1).Microseconds())/idle.Seconds()/float64(n))
	t.Log(report)
	fmt.Fprintln(os.Stderr, report)
}

// idleStream opens a stream on a raw connection and reads it until t ends.
func idleStream(t *testing.T, base, sku string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "GET /api/v1/products/%s/events HTTP/1.1\r\nHost: shop\r\n\r\n", sku); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, c) }()
}

func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// cpuTime is the process's user + system CPU time (clock ticks of 10 ms).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// metricValue reads one unlabelled series from /metrics.
func metricValue(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
func kib(b int64) float64 { return float64(b) / (1 << 10) }
