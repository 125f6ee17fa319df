package bench

import (
	"context"
	"strconv"
)

// runs measures every run's phases, printing each run's figures as it
// goes.
func (b *bench) runs(ctx context.Context) {
	c := b.cfg
	b.printf("\n== per run: purchases (shop loadtest, %d connections, %s) vs redis-benchmark -c %d (reserve.lua);\n",
		c.Connections, c.Duration, rbClients)
	b.printf("   purchases at half that rate; GET product vs GET /healthz (%s each, %d connections)\n", c.ReadDuration, c.Connections)
	for i := 1; i <= c.Runs && ctx.Err() == nil; i++ {
		b.run(ctx, i)
	}
}

func (b *bench) run(ctx context.Context, i int) {
	b.printf("-- run %d, load %s\n", i, loadAvg())
	p := b.purchases(ctx, i)
	b.purchaseRuns = append(b.purchaseRuns, p)
	b.printf("   purchases %s/s (p50 %s ms, p99 %s ms, invariants ok: %t), bare script %s ops/s: ratio %s; minimal script %s ops/s: ratio %s\n",
		num(p.HTTP), num(p.P50), num(p.P99), p.OK, num(p.Script), fixed(p.Ratio, 3), num(p.Minimal), fixed(p.MinRate, 3))
	if rate := half(p.HTTP); rate > 0 {
		h := b.fixedRate(ctx, i, rate, 1, "half")
		b.half = append(b.half, h)
		hz := b.healthzAt(ctx, i, "healthz-half", rate, 1)
		b.healthzHalf = append(b.healthzHalf, healthzRun{Rate: rate, P99: hz, Ratio: ratio(h.P99, hz)})
		b.printf("   at %d/s (half): %s/s, p99 %s ms (invariants ok: %t); GET /healthz at that rate: p99 %s ms\n",
			rate, num(h.Attempts), num(h.P99), h.OK, num(hz))
		if v, ok := b.lastView("half", i); ok {
			b.printView(v)
			b.printf("      meanwhile %s orders per writer batch, %s PostgreSQL commits per purchase\n", fixed(v.PerBatch, 1), fixed(v.CommitsPer, 2))
		}
	}
	b.reads(ctx, i, p.SKU)
	if b.haveWrk {
		w, measured := b.wrkPurchases(ctx, i, p.Script)
		if measured {
			b.wrkRuns = append(b.wrkRuns, w)
		}
		b.printf("   wrk      purchases %s/s (p50 %s ms, p99 %s ms, %s accepted, invariants ok: %t): ratio to the bare script %s\n",
			num(w.PerSec), num(w.P50), num(w.P99), whole(w.Accepted), w.OK, fixed(w.Ratio, 3))
		b.printf("   wrk      at %s/s (half): %s/s, p50 %s ms, p99 %s ms (%s requests over 1 ms behind their slot, the latest by %s ms)\n",
			whole(w.HalfRate), num(w.HalfGot), num(w.HalfP50), num(w.HalfP99), num(w.Late), num(w.LateMaxMs))
	}
	pl := b.plainClient(ctx, i, p)
	b.plain = append(b.plain, pl)
	b.printf("   plain    purchases %s/s (p99 %s ms): ratio to the minimal script %s, to reserve.lua %s\n",
		num(pl.PerSec), num(pl.P99), fixed(pl.RatioMinimal, 3), fixed(pl.RatioScript, 3))
	b.printf("   plain    at %d/s (half): p50 %s ms, p99 %s ms; GET /healthz at that rate: p99 %s ms (ratio %s)\n",
		pl.Rate, num(pl.HalfP50), num(pl.HalfP99), num(pl.Healthz), fixed(pl.Ratio, 3))
	if v, ok := b.lastView("half-plain", i); ok {
		b.printView(v)
	}
	for _, r := range b.readRuns {
		if r.run == i {
			b.printf("   %-8s GET product %s/s (p99 %s ms), GET /healthz %s/s (p99 %s ms): ratio %s\n",
				r.Client, num(r.Product), num(r.ProductP99), num(r.Healthz), num(r.HealthP99), fixed(r.Ratio, 3))
		}
	}
}

// lastView is the server's view of this run's window, if it took one.
func (b *bench) lastView(name string, run int) (serverView, bool) {
	vs := b.views[name]
	if len(vs) == 0 || vs[len(vs)-1].run != run {
		return serverView{}, false
	}
	return vs[len(vs)-1], true
}

func (b *bench) printView(v serverView) {
	b.printf("      inside the server: p50 %s ms, p99 %s ms, %s over 10 ms; its script call p50 %s ms, p99 %s ms\n",
		fixed(v.P50, 2), fixed(v.P99, 2), fixed(v.Over10ms, 4), fixed(v.ScriptP50, 2), fixed(v.ScriptP99, 2))
}

// rateTable is the latency at the extra fixed rates (--rate).
func (b *bench) rateTable(ctx context.Context) {
	if len(b.cfg.Rates) == 0 {
		return
	}
	b.printf("\n== latency at fixed rates: shop loadtest --rate R --connections %d --duration %s\n", b.cfg.Connections, b.cfg.RateDuration)
	b.printf("%-8s %12s %9s %9s %9s %9s %6s\n", "rate", "attempts/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "ok")
	for _, rate := range b.cfg.Rates {
		r := b.fixedRate(ctx, 1, rate, 1, "")
		b.rates = append(b.rates, r)
		b.printf("%-8s %12s %9s %9s %9s %9s %6t\n", strconv.Itoa(r.Rate), num(r.Attempts), num(r.P50), num(r.P90), num(r.P99), num(r.Max), r.OK)
	}
}
