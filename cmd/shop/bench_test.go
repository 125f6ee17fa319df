package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBenchFlagsReadTheirVariables(t *testing.T) {
	t.Parallel()
	env := map[string]string{"BENCH_RUNS": "3", "BENCH_DURATION": "5s", "BENCH_PROFILE_DELAY": "4", "BENCH_PROFILE": "1",
		"BENCH_SKIP_HOT": "0", "BENCH_SERVER_ARGS": "--linger 10ms"}
	a := &app{getenv: func(k string) string { return env[k] }}
	f := newBenchCmd(a).Flags()
	for _, tc := range []struct{ flag, want string }{
		{"runs", "3"}, {"duration", "5s"}, {"profile-delay", "4s"}, {"profile", "true"}, {"skip-hot", "false"},
		{"server-args", "--linger 10ms"}, {"users", "200"}, {"read-duration", "10s"},
	} {
		if got := f.Lookup(tc.flag).Value.String(); got != tc.want {
			t.Errorf("--%s = %q, want %q", tc.flag, got, tc.want)
		}
	}
	if d, _ := f.GetDuration("rate-duration"); d != 15*time.Second {
		t.Errorf("--rate-duration = %v, want 15s", d)
	}
}

func TestIntList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"", nil, false}, {"1000 3000 5000", []int{1000, 3000, 5000}, false}, {"1000,2000", []int{1000, 2000}, false},
		{"fast", nil, true}, {"0", nil, true},
	} {
		got, err := intList(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("intList(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// Outside the repository the bench stops before it starts anything, with
// one line saying why.
func TestBenchOutsideTheRepository(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"bench", "--dir", t.TempDir()}, func(string) string { return "" }, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "not the shop repository") || strings.Count(err.Error(), "\n") > 0 {
		t.Fatalf("err = %v, want one line naming the repository", err)
	}
}
