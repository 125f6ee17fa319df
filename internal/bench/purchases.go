package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// rbClients are the bare scripts' redis-benchmark clients.
const rbClients = 50

// purchases is a run's attack at full speed from one core, then the bare
// scripts on the same Redis: reserve.lua with the server's KEYS/ARGV
// layout, and the minimal purchase (scripts/bench-minimal.lua).
func (b *bench) purchases(ctx context.Context, run int) purchaseRun {
	if run == 1 && b.cfg.Profile {
		// The middle of the attack, after the shoppers are set up.
		go b.profileAttack(ctx, "cpu.pprof", 10)
	}
	var extra []string
	if run == 1 && b.cfg.LoadtestProfile {
		extra = []string{"--cpuprofile", b.path("loadtest-cpu.pprof")}
	}
	b.aofSettle(ctx)
	rw := b.aofRewrites(ctx)
	var before map[string]cmdStat
	if run == 1 {
		before = b.commandStats(ctx)
	}
	rep, start := b.purchaseLoad(ctx, fmt.Sprintf("loadtest-%d.json", run), 1, 0, b.cfg.Duration, extra...)
	b.markAttack(run, "purchases", start, rep)
	b.rewritesSince(ctx, rw, "purchases", run)
	if run == 1 {
		// Redis's own account of the attack (with its shoppers' set-up
		// and the writer's drain), per purchase.
		b.perPurchase = perPurchase(before, b.commandStats(ctx), requests(rep))
	}
	p := purchaseRun{HTTP: attempts(rep), P50: latency(rep).P50, P99: latency(rep).P99}
	if rep != nil {
		p.OK, p.SKU = rep.OK, rep.SKU
	}
	p.Script = b.bareReserve(ctx, run)
	p.Minimal = b.bareMinimal(ctx, run)
	p.Ratio, p.MinRate = ratio(p.HTTP, p.Script), ratio(p.HTTP, p.Minimal)
	return p
}

// rb is the prefix of the bare scripts' keys.
func (b *bench) rb() string { return b.prefix + "rb:" }

// bareReserve is reserve.lua alone, as internal/order/lines.go composes
// it, from a sale that never runs out, no per-user limit, every call on
// the buy path: ops/s.
func (b *bench) bareReserve(ctx context.Context, run int) float64 {
	src, err := b.scriptSource("internal/order/lines.lua", "internal/order/reserve.lua")
	if err != nil {
		b.warnf("reserve script: %v", err)
		return na
	}
	// Loaded each time: a test run elsewhere may have flushed the cache.
	sha, err := b.rdb.ScriptLoad(ctx, "#!lua\n"+src).Result()
	if err != nil {
		b.warnf("SCRIPT LOAD reserve: %v", err)
		return na
	}
	p := b.rb()
	b.rdb.Unlink(ctx, p+"orders", p+"orders:due", p+"sale:{rb}:buyers")
	b.rdb.HSet(ctx, p+"sale:{rb}", "round", 1, "quantity", 1000000000000, "available", 1000000000000, "limit", 0,
		"starts_ms", 0, "ends_ms", 0, "price_cents", 100)
	args := []string{"EVALSHA", sha, "9", p + "orders", p + "order:__rand_int__", p + "orders:pending:{__rand_int__}",
		p + "idem:{__rand_int__}:__rand_int__", p + "nocart", p + "orders:due", p + "sale:{rb}", p + "sale:{rb}:buyers",
		p + "sale:{rb}:room:passes", "__rand_int__", "__rand_int__", "604800000", "86400000", "1", "0", "900000", "0", "1",
		"rb", "1", p + "sale:{rb}:changed", "0", "", ""}
	ops := b.redisBenchmark(ctx, run, "bare", fmt.Sprintf("redis-benchmark-%d.csv", run), args)
	// Its keys (200k status hashes with a week's TTL) go now.
	b.unlinkPrefix(ctx, p)
	return ops
}

// bareMinimal is the minimal purchase (GET, HGET, DECRBY, HINCRBY, XADD)
// on a stock that never runs out, random buyers: the floor of any
// purchase script.
func (b *bench) bareMinimal(ctx context.Context, run int) float64 {
	src, err := b.scriptSource("scripts/bench-minimal.lua")
	if err != nil {
		b.warnf("minimal script: %v", err)
		return na
	}
	sha, err := b.rdb.ScriptLoad(ctx, src).Result()
	if err != nil {
		b.warnf("SCRIPT LOAD minimal: %v", err)
		return na
	}
	p := b.rb()
	b.rdb.Set(ctx, p+"min:stock", 1000000000000, 0)
	args := []string{"EVALSHA", sha, "3", p + "min:stock", p + "min:buyers", p + "min:orders", "__rand_int__", "1"}
	ops := b.redisBenchmark(ctx, run, "bare-minimal", fmt.Sprintf("redis-benchmark-minimal-%d.csv", run), args)
	b.rdb.Unlink(ctx, p+"min:stock", p+"min:buyers", p+"min:orders")
	return ops
}

// scriptSource is the files' text as the shell's $(cat ...) gave it.
func (b *bench) scriptSource(files ...string) (string, error) {
	var s strings.Builder
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(b.cfg.Dir, f))
		if err != nil {
			return "", err
		}
		s.Write(raw)
	}
	return strings.TrimRight(s.String(), "\n"), nil
}

// redisBenchmark runs one script call through redis-benchmark and notes
// its window (the client, redis-benchmark, shows as other): ops/s.
func (b *bench) redisBenchmark(ctx context.Context, run int, name, file string, call []string) float64 {
	args := append([]string{"-h", b.rhost, "-p", b.rport, "--dbnum", strconv.Itoa(b.rdbNum), "-c", strconv.Itoa(rbClients),
		"-n", strconv.Itoa(b.cfg.BareRequests), "-r", "1000000000", "--csv"}, call...)
	start := now()
	out, err := exec.CommandContext(ctx, "redis-benchmark", args...).Output()
	_ = os.WriteFile(b.path(file), out, 0o644)
	if err != nil {
		b.warnf("redis-benchmark (%s): %v", name, err)
	}
	ops := parseRedisBenchmark(string(out))
	b.markInner(run, name, ops, start, now())
	return ops
}

// fixedRate is purchases at rate/s for 15 s on the same connections. A
// view ("half", "half-plain") also takes the server's and Redis's
// account of the window.
func (b *bench) fixedRate(ctx context.Context, run, rate int, procs int, view string) rateRun {
	name := view
	if name == "" {
		name = "rate-" + strconv.Itoa(rate)
	}
	if run == 1 && view == "half" && b.cfg.Profile {
		// What a purchase costs when the batches are smaller.
		go b.profileAttack(ctx, "cpu-half.pprof", 8)
	}
	b.aofSettle(ctx)
	rw := b.aofRewrites(ctx)
	var before snapshot
	var stats map[string]cmdStat
	if view != "" {
		before = b.snapshot(ctx)
		stats = b.windowStart(ctx)
	}
	rep, start := b.purchaseLoad(ctx, fmt.Sprintf("loadtest-rate-%d-%d.json", run, rate), procs, rate, b.cfg.RateDuration)
	if view != "" {
		from, to := 0.0, 9999999999.0
		if rep != nil {
			from, to = attackWindow(start, rep.SetupSeconds, rep.Attack.Seconds)
		}
		b.windowEnd(ctx, stats, run, view, from, to)
		if v, ok := viewOf(before, b.snapshot(ctx), requests(rep)); ok {
			v.run = run
			if b.views == nil {
				b.views = map[string][]serverView{}
			}
			b.views[view] = append(b.views[view], v)
		}
	}
	b.markAttack(run, name, start, rep)
	b.rewritesSince(ctx, rw, name, run)
	l := latency(rep)
	r := rateRun{Rate: rate, Attempts: attempts(rep), P50: l.P50, P90: l.P90, P99: l.P99, Max: l.Max}
	if rep != nil {
		r.OK = rep.OK
	}
	return r
}

// healthzAt is GET /healthz at rate/s for 15 s from the purchases'
// client, the same connections and addresses: the server's floor at a
// purchase phase's rate; its p99 (ms).
func (b *bench) healthzAt(ctx context.Context, run int, name string, rate, procs int) float64 {
	rep, start := b.getLoad(ctx, fmt.Sprintf("get-%d-%s.json", run, name), "/healthz", procs, rate, b.cfg.RateDuration)
	b.markGet(run, name, start, rep)
	_, p99 := getFigures(rep)
	return p99
}

// plainClient is the purchases as an outside Go client sends them: `shop
// loadtest` on every core (vegeta's net/http client), at full speed, then
// at half of that with the server's and Redis's view, then GET /healthz
// at that rate from the same client.
func (b *bench) plainClient(ctx context.Context, run int, p purchaseRun) plainRun {
	b.aofSettle(ctx)
	rw := b.aofRewrites(ctx)
	rep, start := b.purchaseLoad(ctx, fmt.Sprintf("loadtest-plain-%d.json", run), 0, 0, b.cfg.Duration)
	b.markAttack(run, "purchases-plain", start, rep)
	b.rewritesSince(ctx, rw, "purchases-plain", run)
	r := plainRun{PerSec: attempts(rep), P99: latency(rep).P99, HalfP50: na, HalfP99: na, Healthz: na}
	r.RatioMinimal, r.RatioScript = ratio(r.PerSec, p.Minimal), ratio(r.PerSec, p.Script)
	r.Rate = half(r.PerSec)
	if r.Rate > 0 {
		h := b.fixedRate(ctx, run, r.Rate, 0, "half-plain")
		b.halfPlain = append(b.halfPlain, h)
		r.HalfP50, r.HalfP99 = h.P50, h.P99
		r.Healthz = b.healthzAt(ctx, run, "healthz-half-plain", r.Rate, 0)
	}
	r.Ratio = ratio(r.HalfP99, r.Healthz)
	return r
}
