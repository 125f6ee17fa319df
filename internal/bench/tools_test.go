package bench

import (
	"math"
	"testing"
)

func TestParseRedisBenchmark(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     float64
	}{
		{"csv", "\"test\",\"rps\",\"avg_latency_ms\"\n\"EVALSHA abc 9 k1\",\"31250.00\",\"1.503\"\n", 31250},
		{"empty", "", na},
		{"header only", "\"test\",\"rps\"\n", na},
	} {
		got := parseRedisBenchmark(tc.in)
		if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

const wrkOut = `Running 20s test @ http://127.0.0.1:18090
  1 threads and 200 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    12.10ms    3.00ms  80.00ms   90.00%
  Latency Distribution
     50%  850.00us
     75%   10.00ms
     90%   15.00ms
     99%    1.20s
  60000 requests in 20.00s, 12.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 10
Requests/sec:   3000.50
Transfer/sec:    600.00KB
status 202 59990
status 409 10
late 4 2.5
`

func TestParseWrk(t *testing.T) {
	r := parseWrk(wrkOut)
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"requests/s", r.PerSec, 3000.5},
		{"p50", r.P50, 0.85},
		{"p99", r.P99, 1200},
		{"202", r.Statuses[202], 59990},
		{"409", r.Statuses[409], 10},
		{"socket errors", r.SocketErrors, 5},
		{"late", r.Late, 4},
		{"late max", r.LateMaxMs, 2.5},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if !r.Non2xx {
		t.Error("Non-2xx line missed")
	}
	if e := parseWrk("unable to connect\n"); !math.IsNaN(e.PerSec) || !math.IsNaN(e.P99) {
		t.Errorf("a failed run: got %+v, want n/a", e)
	}
}
