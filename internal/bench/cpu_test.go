package bench

import (
	"math"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	got, ok := parseProcStat("cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n")
	want := machineTicks{busy: 100 + 5 + 50 + 3 + 2 + 7, total: 167 + 1000 + 20, steal: 7}
	if !ok || got != want {
		t.Errorf("got %+v %v, want %+v", got, ok, want)
	}
	if _, ok := parseProcStat("intr 1 2 3\n"); ok {
		t.Error("no cpu line: want false")
	}
}

func TestParsePidStat(t *testing.T) {
	for _, tc := range []struct {
		name, in, comm string
		ticks          float64
		ok             bool
	}{
		{"plain", "1234 (redis-server) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 5 0", "redis-server", 300, true},
		{"space in name", "77 (tmux: server) S 1 77 77 0 -1 0 0 0 0 0 10 20 0 0 20 0 1 0", "tmux: server", 30, true},
		{"cut short", "77 (shop) S 1 2", "", 0, false},
		{"garbage", "nothing here", "", 0, false},
	} {
		comm, ticks, ok := parsePidStat(tc.in)
		if comm != tc.comm || ticks != tc.ticks || ok != tc.ok {
			t.Errorf("%s: got %q %v %v, want %q %v %v", tc.name, comm, ticks, ok, tc.comm, tc.ticks, tc.ok)
		}
	}
	if got := parseSchedWait("123 4567 89\n"); got != 4567 {
		t.Errorf("schedstat wait = %v, want 4567", got)
	}
}

func TestCPUReport(t *testing.T) {
	samples := []cpuSample{
		{at: 100, m: machineTicks{busy: 1000, total: 2000}, procs: map[int]procSample{
			10: {"shop", 100, 0}, 11: {"shop", 50, 0}, 12: {"redis-server", 10, 0}}},
		{at: 101, m: machineTicks{busy: 1100, total: 2200}, procs: map[int]procSample{
			10: {"shop", 150, 1e8}, 11: {"shop", 70, 0}, 12: {"redis-server", 30, 0}}},
		{at: 102, m: machineTicks{busy: 1200, total: 2400}, procs: map[int]procSample{
			10: {"shop", 200, 2e8}, 11: {"shop", 90, 0}, 12: {"redis-server", 50, 0}, 13: {"postgres", 10, 0}}},
	}
	rows := cpuReport(samples, []phase{
		{1, "purchases", 1000, 99.5, 102.5},
		{1, "too short", 5, 101.5, 101.9},
	}, 100, map[int]bool{10: true})
	if len(rows) != 1 {
		t.Fatalf("rows %+v, want one", rows)
	}
	r := rows[0]
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"secs", r.Secs, 2},
		{"server", r.Busy["server"], 0.5},
		{"client", r.Busy["client"], 0.2},
		{"redis", r.Busy["redis"], 0.2},
		{"postgres", r.Busy["postgres"], 0.05},
		{"other", r.Other, 0.05},
		{"idle", r.Idle, 1},
		{"server waits", r.Wait["server"], 0.1},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
