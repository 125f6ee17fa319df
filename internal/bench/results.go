package bench

// results are every run's figures, by phase; the summary takes their
// medians.
type results struct {
	purchaseRuns []purchaseRun
	half         []rateRun // purchases at half the run's maximum
	halfPlain    []rateRun
	rates        []rateRun // the extra fixed rates (--rate)
	healthzHalf  []healthzRun
	views        map[string][]serverView // half, half-plain
	tails        []redisTail
	readRuns     []readRun
	wrkRuns      []wrkRun
	plain        []plainRun
	rewrites     []string
	perPurchase  []perCall
	drain, copy  []float64
	phases       []phase
	cpu          []cpuRow
}

// purchaseRun: the HTTP attack and the two bare scripts of one run.
type purchaseRun struct {
	HTTP, P50, P99   float64
	OK               bool
	Script, Ratio    float64 // reserve.lua ops/s, HTTP / it
	SKU              string
	Minimal, MinRate float64 // bench-minimal.lua ops/s, HTTP / it
}

// rateRun: purchases at a fixed rate.
type rateRun struct {
	Rate                         int
	Attempts, P50, P90, P99, Max float64
	OK                           bool
}

// healthzRun: GET /healthz at the half rate, and purchases' p99 / its.
type healthzRun struct {
	Rate       int
	P99, Ratio float64
}

// readRun: a product read against /healthz with one client.
type readRun struct {
	run                                     int
	Client                                  string
	Product, ProductP99, Healthz, HealthP99 float64
	Ratio                                   float64
}

// wrkRun: purchases with wrk as the client, at full speed and paced at
// half of it.
type wrkRun struct {
	PerSec, P50, P99, Accepted float64
	OK                         bool
	Ratio                      float64
	HalfRate, HalfGot          float64
	HalfP50, HalfP99           float64
	Late, LateMaxMs            float64
}

// plainRun: the purchases from the plain client (all cores), at full
// speed and at half, beside /healthz at that rate.
type plainRun struct {
	PerSec, P99               float64
	RatioMinimal, RatioScript float64
	Rate                      int
	HalfP50, HalfP99          float64
	Healthz, Ratio            float64
}

// mark notes one measured window.
func (r *results) mark(run int, name string, rate, from, to float64) {
	r.phases = append(r.phases, phase{Run: run, Name: name, Rate: rate, From: from, To: to})
}

// markInner notes a window less a second at each end (the client's
// start and its last answers).
func (r *results) markInner(run int, name string, rate, from, to float64) {
	r.mark(run, name, rate, from+1, to-1)
}
