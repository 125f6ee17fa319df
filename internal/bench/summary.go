package bench

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// summary prints the ratios side by side (medians over the runs, each
// ratio measured within one run), where the cores went and Redis's
// commands per purchase; also to summary.txt.
func (b *bench) summary() error {
	var t report
	r := &b.results
	t.f("\n== the four ratios: medians of %d run(s), each ratio measured within one run; load %s at the start, %s at the end;\n",
		b.cfg.Runs, b.loadStart, loadAvg())
	t.f("   %.1f core-seconds stolen by the host (steal) while the bench ran\n", steal()-b.stealStart)
	t.row("", "measured", "baseline", "ratio", "target")
	throughputRows(&t, r)
	tailRows(&t, r)
	redisClockRows(&t, r)
	readRows(&t, r)
	if len(r.drain) > 0 && len(r.copy) > 0 {
		d, c := median(r.drain), median(r.copy)
		t.row("order writer drain orders/s / COPY of the same rows", num(d), num(c), fixed(ratio(d, c), 3), ">= 0.8")
	}
	if len(r.cpu) > 0 {
		cpuTables(&t.Builder, r.cpu, b.cfg.Runs)
	}
	if len(r.perPurchase) > 0 {
		t.f("\n== Redis's commands per purchase (run 1, INFO commandstats; a script's commands also count inside its EVALSHA)\n")
		t.f("%-22s %8s %8s\n", "command", "calls", "µs")
		writePerPurchase(&t, r.perPurchase, 15)
		var all strings.Builder
		writePerPurchase(&all, r.perPurchase, len(r.perPurchase))
		_ = os.WriteFile(b.path("redis-commands.txt"), []byte(all.String()), 0o644)
	}
	if len(r.rewrites) > 0 {
		t.f("automatic AOF rewrites inside measured phases (run, phase, count): %s\n", strings.Join(r.rewrites, "; "))
	}
	t.f("per run: the load tests' reports (loadtest-*.json, get-*.json), redis-benchmark-*.csv, wrk-*.txt, slowlog-*.txt, writer.txt in %s/\n", b.cfg.Out)
	b.printf("%s", t.String())
	return os.WriteFile(b.path("summary.txt"), []byte(t.String()), 0o644)
}

// report is the summary's text and its two kinds of line.
type report struct{ strings.Builder }

func (t *report) f(format string, args ...any) { fmt.Fprintf(t, format, args...) }

func (t *report) row(label, measured, baseline, ratio, target string) {
	t.f("%-58s %14s %14s %9s %8s\n", label, measured, baseline, ratio, target)
}

func (t *report) pair(label, a, b string) { t.f("  %-56s %14s %14s\n", label, a, b) }

// throughputRows: purchases against the bare scripts, by client.
func throughputRows(t *report, r *results) {
	http := medianOf(r.purchaseRuns, func(p purchaseRun) float64 { return p.HTTP })
	script := medianOf(r.purchaseRuns, func(p purchaseRun) float64 { return p.Script })
	minimal := medianOf(r.purchaseRuns, func(p purchaseRun) float64 { return p.Minimal })
	t.row(fmt.Sprintf("HTTP purchases/s / bare reserve script (redis-benchmark -c %d)", rbClients), num(http), num(script),
		fixed(medianOf(r.purchaseRuns, func(p purchaseRun) float64 { return p.Ratio }), 3), ">= 0.35")
	t.row("  the same / bare minimal purchase script (bench-minimal.lua)", num(http), num(minimal),
		fixed(medianOf(r.purchaseRuns, func(p purchaseRun) float64 { return p.MinRate }), 3), "")
	if len(r.plain) > 0 {
		plain := medianOf(r.plain, func(p plainRun) float64 { return p.PerSec })
		t.row("  plain client (shop loadtest --procs 0) / minimal script", num(plain), num(minimal),
			fixed(medianOf(r.plain, func(p plainRun) float64 { return p.RatioMinimal }), 3), ">= 0.35")
		t.row("  plain client / bare reserve script", num(plain), num(script),
			fixed(medianOf(r.plain, func(p plainRun) float64 { return p.RatioScript }), 3), "")
	}
	if len(r.wrkRuns) > 0 {
		t.row(fmt.Sprintf("  the same, wrk -t1 as the client (invariants: %s)", wrkInvariants(r.wrkRuns)),
			num(medianOf(r.wrkRuns, func(x wrkRun) float64 { return x.PerSec })), num(script),
			fixed(medianOf(r.wrkRuns, func(x wrkRun) float64 { return x.Ratio }), 3), ">= 0.35")
	}
}

// tailRows: the p99 at half rate by client, beside /healthz's, and the
// server's own view of those windows.
func tailRows(t *report, r *results) {
	t.row("p99 ms of purchases at half the measured maximum", num(medianOf(r.half, func(h rateRun) float64 { return h.P99 })),
		"at "+num(medianOf(r.half, func(h rateRun) float64 { return float64(h.Rate) }))+"/s", "", "<= 10")
	if len(r.healthzHalf) > 0 {
		t.row("  GET /healthz's p99 ms at that rate; purchases' / its", num(medianOf(r.healthzHalf, func(h healthzRun) float64 { return h.P99 })),
			"", fixed(medianOf(r.healthzHalf, func(h healthzRun) float64 { return h.Ratio }), 3), "<= 5")
	}
	if len(r.plain) > 0 {
		t.row("  the same, plain client at half its own maximum", num(medianOf(r.plain, func(p plainRun) float64 { return p.HalfP99 })),
			"at "+num(medianOf(r.plain, func(p plainRun) float64 { return float64(p.Rate) }))+"/s", "", "<= 10")
		t.row("  GET /healthz's p99 ms at that rate (plain); purchases' / its", num(medianOf(r.plain, func(p plainRun) float64 { return p.Healthz })),
			"", fixed(medianOf(r.plain, func(p plainRun) float64 { return p.Ratio }), 3), "<= 5")
	}
	if vs := r.views["half-plain"]; len(vs) > 0 {
		t.pair("the plain client's inside the server: p50 / p99 ms", viewPair(vs, viewP50, viewP99), fixed(medianOf(vs, viewOver10), 4)+" over 10 ms")
		t.f("  %-56s %14s\n", "  its one script call: p50 / p99 ms", viewPair(vs, viewScriptP50, viewScriptP99))
	}
	if len(r.wrkRuns) > 0 {
		t.row("  the same, wrk -t1 paced at half its own maximum", num(medianOf(r.wrkRuns, func(x wrkRun) float64 { return x.HalfP99 })),
			"at "+num(medianOf(r.wrkRuns, func(x wrkRun) float64 { return x.HalfRate }))+"/s", "", "<= 10")
	}
	if vs := r.views["half"]; len(vs) > 0 {
		t.pair("shop loadtest's inside the server (its histogram): p50 / p99 ms", viewPair(vs, viewP50, viewP99), fixed(medianOf(vs, viewOver10), 4)+" over 10 ms")
		t.f("  %-56s %14s\n", "  its one script call: p50 / p99 ms", viewPair(vs, viewScriptP50, viewScriptP99))
		t.pair("meanwhile: orders per writer batch, PostgreSQL commits per purchase",
			fixed(medianOf(vs, func(v serverView) float64 { return v.PerBatch }), 1), fixed(medianOf(vs, func(v serverView) float64 { return v.CommitsPer }), 2))
	}
}

// redisClockRows: Redis's own clock on each half-rate window.
func redisClockRows(t *report, r *results) {
	for _, ph := range []string{"half", "half-plain", "half-wrk"} {
		ts := where(r.tails, func(x redisTail) bool { return x.Phase == ph })
		if len(ts) == 0 {
			continue
		}
		m := func(f func(redisTail) float64) float64 { return medianOf(ts, f) }
		t.pair(fmt.Sprintf("Redis's own clock (%s): script calls, mean µs of one", ph),
			num(m(func(x redisTail) float64 { return x.Calls })), fixed(m(func(x redisTail) float64 { return x.MeanUsec }), 1))
		t.pair("  calls over 1 ms / over 10 ms; the longest, ms",
			num(m(func(x redisTail) float64 { return x.Over1 }))+" / "+num(m(func(x redisTail) float64 { return x.Over10 })),
			fixed(m(func(x redisTail) float64 { return x.MaxMs }), 2))
		t.pair("  O(1) and other commands over 1 ms; the longest, ms",
			num(m(func(x redisTail) float64 { return x.Others })), fixed(m(func(x redisTail) float64 { return x.OthersMaxMs }), 2))
	}
}

// readRows: a product read against /healthz, by client.
func readRows(t *report, r *results) {
	for _, client := range []string{"loadtest", "wrk"} {
		rs := where(r.readRuns, func(x readRun) bool { return x.Client == client })
		if len(rs) == 0 {
			continue
		}
		t.row(fmt.Sprintf("GET product/s / GET /healthz/s (%s)", client), num(medianOf(rs, func(x readRun) float64 { return x.Product })),
			num(medianOf(rs, func(x readRun) float64 { return x.Healthz })), fixed(medianOf(rs, func(x readRun) float64 { return x.Ratio }), 3), ">= 0.5")
	}
}

// where is the rows keep keeps.
func where[T any](rows []T, keep func(T) bool) []T {
	var out []T
	for _, r := range rows {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func wrkInvariants(rs []wrkRun) string {
	var seen []string
	for _, r := range rs {
		v := fmt.Sprint(r.OK)
		if !slices.Contains(seen, v) {
			seen = append(seen, v)
		}
	}
	slices.Sort(seen)
	return strings.Join(seen, " ")
}

func viewP50(v serverView) float64       { return v.P50 }
func viewP99(v serverView) float64       { return v.P99 }
func viewOver10(v serverView) float64    { return v.Over10ms }
func viewScriptP50(v serverView) float64 { return v.ScriptP50 }
func viewScriptP99(v serverView) float64 { return v.ScriptP99 }

func viewPair(vs []serverView, a, b func(serverView) float64) string {
	return fixed(medianOf(vs, a), 2) + " / " + fixed(medianOf(vs, b), 2)
}

// cpuPhases are the phases of the cores' tables, in their order.
var cpuPhases = []string{"purchases", "purchases-plain", "purchases-wrk", "bare", "bare-minimal", "half", "healthz-half",
	"half-plain", "healthz-half-plain", "half-wrk", "product-loadtest", "healthz-loadtest", "product-wrk", "healthz-wrk"}

// cpuTables prints, per phase, the cores each kind of process kept busy
// and the time its threads waited runnable for a core, each also in
// core-µs per request at the phase's rate.
func cpuTables(s *strings.Builder, rows []cpuRow, runs int) {
	byPhase := map[string][]cpuRow{}
	for _, r := range rows {
		byPhase[r.Name] = append(byPhase[r.Name], r)
	}
	busy := func(r cpuRow) []float64 { return append(byKind(r.Busy), r.Other) }
	idle := func(rs []cpuRow) string {
		return fmt.Sprintf(" %7s", fixed(medianOf(rs, func(r cpuRow) float64 { return r.Idle }), 3))
	}
	fmt.Fprintf(s, "\n== where the two cores go: cores busy per kind of process (medians of %d run(s); in brackets, core-µs per request at the phase's rate)\n", runs)
	fmt.Fprintf(s, "%-18s %10s %13s %13s %13s %13s %13s %7s\n", "phase", "req/s", "server", "client", "redis", "postgres", "other", "idle")
	cpuTable(s, byPhase, busy, idle)
	fmt.Fprintf(s, "\n== runnable but waiting for a core (schedstat; s per s, in brackets µs per request): where the tail comes from\n")
	fmt.Fprintf(s, "%-18s %10s %13s %13s %13s %13s\n", "phase", "req/s", "server", "client", "redis", "postgres")
	cpuTable(s, byPhase, func(r cpuRow) []float64 { return byKind(r.Wait) }, func([]cpuRow) string { return "" })
}

func byKind(m map[string]float64) []float64 {
	out := make([]float64, len(kinds))
	for i, k := range kinds {
		out[i] = m[k]
	}
	return out
}

// cpuTable prints a line per phase: its rate, then each of values'
// columns as its median and, in brackets, the median per request.
func cpuTable(s *strings.Builder, byPhase map[string][]cpuRow, values func(cpuRow) []float64, tail func([]cpuRow) string) {
	for _, ph := range cpuPhases {
		rs := byPhase[ph]
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(s, "%-18s %10s", ph, num(medianOf(rs, func(r cpuRow) float64 { return r.Rate })))
		for c := range values(rs[0]) {
			v := func(r cpuRow) float64 { return values(r)[c] }
			perReq := func(r cpuRow) float64 {
				if r.Rate <= 0 {
					return na
				}
				return v(r) * 1e6 / r.Rate
			}
			fmt.Fprintf(s, " %6s (%4s)", fixed(medianOf(rs, v), 3), whole(medianOf(rs, perReq)))
		}
		s.WriteString(tail(rs) + "\n")
	}
}
