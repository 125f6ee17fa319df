package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The summary takes each figure's median over the runs, and each ratio's
// median of the same-run ratios (not the ratio of the medians).
func TestSummaryMedians(t *testing.T) {
	var out bytes.Buffer
	b := &bench{cfg: Config{Runs: 2, Out: t.TempDir()}, out: &out}
	b.purchaseRuns = []purchaseRun{
		{HTTP: 4000, Script: 10000, Ratio: 0.4, Minimal: 20000, MinRate: 0.2},
		{HTTP: 5000, Script: 20000, Ratio: 0.25, Minimal: 25000, MinRate: 0.2},
	}
	b.half = []rateRun{{Rate: 2000, P99: 10}, {Rate: 2500, P99: 30}}
	b.healthzHalf = []healthzRun{{Rate: 2000, P99: 2, Ratio: 5}, {Rate: 2500, P99: 4, Ratio: 7.5}}
	b.readRuns = []readRun{{Client: "loadtest", Product: 600, Healthz: 1000, Ratio: 0.6}}
	b.drain, b.copy = []float64{22000, 24000, 23000}, []float64{30000}
	b.perPurchase = []perCall{{"evalsha", 1, 150}}
	if err := b.summary(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"HTTP purchases/s / bare reserve script (redis-benchmark -c 50)           4500          15000     0.325  >= 0.35",
		"p99 ms of purchases at half the measured maximum                       20      at 2250/s              <= 10",
		"  GET /healthz's p99 ms at that rate; purchases' / its                  3                    6.250     <= 5",
		"GET product/s / GET /healthz/s (loadtest)                             600           1000     0.600   >= 0.5",
		"order writer drain orders/s / COPY of the same rows                 23000          30000     0.767   >= 0.8",
		"evalsha                   1.000   150.00",
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	saved, err := os.ReadFile(b.path("summary.txt"))
	if err != nil || string(saved) != out.String() {
		t.Errorf("summary.txt differs from what was printed (%v)", err)
	}
}

func TestCPUTables(t *testing.T) {
	row := func(run int, rate, server float64) cpuRow {
		return cpuRow{phase: phase{Run: run, Name: "half", Rate: rate}, Secs: 10,
			Busy: map[string]float64{"server": server, "client": 0.1, "redis": 0.2, "postgres": 0.05}, Other: 0.15, Idle: 1,
			Wait: map[string]float64{"server": 0.01}}
	}
	var s strings.Builder
	cpuTables(&s, []cpuRow{row(1, 1000, 0.4), row(2, 2000, 0.6), {phase: phase{Name: "bare", Rate: 0}, Busy: map[string]float64{}}}, 2)
	for _, want := range []string{
		"half                     1500  0.500 ( 350)  0.100 (  75)  0.200 ( 150)  0.050 (  38)  0.150 ( 112)   1.000\n",
		"half                     1500  0.010 (   8)  0.000 (   0)  0.000 (   0)  0.000 (   0)\n",
		"bare                        0  0.000 ( n/a)",
	} {
		if !strings.Contains(s.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, s.String())
		}
	}
}
