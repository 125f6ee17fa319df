package bench

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"time"

	"github.com/shop-oss/shop/internal/loadtest"
)

// purchaseLoad runs `shop loadtest` (its JSON report to file) with procs
// cores at rate (0: as fast as the connections go); nil when it wrote no
// report. A report whose invariants failed is still read.
func (b *bench) purchaseLoad(ctx context.Context, file string, procs, rate int, d time.Duration, extra ...string) (*loadtest.Report, float64) {
	c := b.cfg
	args := []string{"loadtest", "--target", b.base(), "--admin-email", adminEmail, "--admin-password", adminPassword,
		"--users", strconv.Itoa(c.Users), "--units", "1000000", "--per-user-limit", "0",
		"--connections", strconv.Itoa(c.Connections), "--forwarded-for", "--json",
		"--procs", strconv.Itoa(procs), "--rate", strconv.Itoa(rate), "--duration", d.String()}
	start := now()
	if err := b.runTo(ctx, file, append(args, extra...)); err != nil {
		b.warnf("%s reported a failure (see %s)", describe(rate, "loadtest"), b.path(file))
	}
	var rep loadtest.Report
	if !b.decode(file, &rep) {
		return nil, start
	}
	return &rep, start
}

// getLoad runs `shop loadtest get` of path at rate (0: full speed).
func (b *bench) getLoad(ctx context.Context, file, path string, procs, rate int, d time.Duration) (*loadtest.GetReport, float64) {
	args := []string{"loadtest", "get", "--target", b.base(), "--path", path, "--connections", strconv.Itoa(b.cfg.Connections),
		"--duration", d.String(), "--addresses", strconv.Itoa(b.cfg.Users), "--procs", strconv.Itoa(procs), "--json"}
	if rate > 0 {
		args = append(args, "--rate", strconv.Itoa(rate))
	}
	start := now()
	if err := b.runTo(ctx, file, args); err != nil {
		b.warnf("loadtest get %s reported a failure (see %s)", path, b.path(file))
	}
	var rep loadtest.GetReport
	if !b.decode(file, &rep) {
		return nil, start
	}
	return &rep, start
}

func describe(rate int, what string) string {
	if rate > 0 {
		return "the " + what + " at " + strconv.Itoa(rate) + "/s"
	}
	return "the " + what
}

func (b *bench) runTo(ctx context.Context, file string, args []string) error {
	f, err := os.Create(b.path(file))
	if err != nil {
		return err
	}
	defer f.Close()
	return b.shop(ctx, f, nil, args...)
}

func (b *bench) decode(file string, v any) bool {
	raw, err := os.ReadFile(b.path(file))
	return err == nil && json.Unmarshal(raw, v) == nil
}

// attackWindow is a load test's attack in epoch seconds: without the
// shoppers' set-up before it or the drain and checks after it.
func attackWindow(start, setup, seconds float64) (from, to float64) {
	return start + setup, start + setup + seconds
}

// markAttack notes a purchase load's attack as a phase, less a second at
// each end.
func (b *bench) markAttack(run int, name string, start float64, rep *loadtest.Report) {
	if rep == nil {
		return
	}
	from, to := attackWindow(start, rep.SetupSeconds, rep.Attack.Seconds)
	b.markInner(run, name, rep.Attack.AttemptsPerSec, from, to)
}

func (b *bench) markGet(run int, name string, start float64, rep *loadtest.GetReport) {
	if rep == nil {
		return
	}
	from, to := attackWindow(start, 0, rep.Seconds)
	b.markInner(run, name, rep.PerSec, from, to)
}

// Figures of a report that may be missing.
func attempts(r *loadtest.Report) float64 {
	if r == nil {
		return na
	}
	return r.Attack.AttemptsPerSec
}

func latency(r *loadtest.Report) loadtest.Latency {
	if r == nil {
		return loadtest.Latency{P50: na, P90: na, P99: na, Max: na}
	}
	return r.Attack.LatencyMs
}

func requests(r *loadtest.Report) float64 {
	if r == nil {
		return 0
	}
	return float64(r.Attack.Requests)
}

func getFigures(r *loadtest.GetReport) (perSec, p99 float64) {
	if r == nil {
		return na, na
	}
	return r.PerSec, r.LatencyMs.P99
}
