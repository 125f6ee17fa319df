package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a load test. Its JSON form (--json) is stable:
// scripts such as `make bench` read it.
type Report struct {
	Target       string      `json:"target"`
	SKU          string      `json:"sku"`
	Shoppers     int         `json:"shoppers"`
	Units        int         `json:"units"`
	PerUserLimit int         `json:"per_user_limit"`
	Rate         int         `json:"rate"` // 0: as fast as the connections go
	Connections  int         `json:"connections"`
	SetupSeconds float64     `json:"setup_seconds"`
	Attack       AttackStats `json:"attack"`
	Stock        StockStats  `json:"stock"`
	// Lifecycle is the payment phase (--pay-ratio); absent without one.
	Lifecycle *LifecycleStats `json:"lifecycle,omitempty"`
	// Room is the waiting room's figures (--waiting-room); absent without.
	Room       *RoomStats  `json:"room,omitempty"`
	Invariants []Invariant `json:"invariants"`
	OK         bool        `json:"ok"`
}

// AttackStats are the attack's figures.
type AttackStats struct {
	StoppedBy string  `json:"stopped_by"` // duration, sold_out, all_at_limit
	Seconds   float64 `json:"seconds"`    // first request sent to last answer
	Requests  uint64  `json:"requests"`
	// AttemptsPerSec is answered purchase attempts per second, whatever
	// the answer: the throughput of the whole purchase path.
	AttemptsPerSec float64 `json:"attempts_per_sec"`
	AcceptedPerSec float64 `json:"accepted_per_sec"`
	Accepted       int     `json:"accepted"`
	// LatencyMs are percentiles of the request latency, in milliseconds.
	LatencyMs   Latency        `json:"latency_ms"`
	StatusCodes map[string]int `json:"status_codes"`
	// Outcomes counts answers by status and problem code.
	Outcomes map[string]int `json:"outcomes"`
	// Errors are distinct transport errors (at most 10).
	Errors []string `json:"errors,omitempty"`
}

// Latency percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// StockStats is the server's stock report after the writer drained, or,
// with a payment phase, after it.
type StockStats struct {
	Seeded    int   `json:"seeded"`
	Available int64 `json:"available"`
	Sold      int64 `json:"sold"`
	Confirmed int64 `json:"confirmed"`
	// Paid is the units of paid orders, Released the units given back by
	// expired orders (docs/api.md's stock report).
	Paid         int64   `json:"paid"`
	Released     int64   `json:"released"`
	Drained      bool    `json:"drained"`
	DrainSeconds float64 `json:"drain_seconds"`
}

// LifecycleStats is what the payment phase did: a share of the winners
// paid, the rest let their orders expire.
type LifecycleStats struct {
	PayRatio float64 `json:"pay_ratio"`
	Payers   int     `json:"payers"`
	Paid     int     `json:"paid"`
	// Late is payers whose window closed first (409 order_not_payable);
	// PendingRetries the 409 order_pending and 503 answers tried again.
	Late           int            `json:"late"`
	PendingRetries int            `json:"pending_retries"`
	PayOutcomes    map[string]int `json:"pay_outcomes"`
	PaySeconds     float64        `json:"pay_seconds"`
	// Expiring is the unpaid orders with a payment window, Expired those
	// read back expired after the wait, NoWindow those without a window
	// (they stay confirmed).
	Expiring int `json:"expiring"`
	Expired  int `json:"expired"`
	NoWindow int `json:"no_window"`
	// ReleasedUnits is the stock report's released once the wait ended.
	ReleasedUnits int64   `json:"released_units"`
	Released      bool    `json:"released"` // all given back before the deadline
	WaitSeconds   float64 `json:"wait_seconds"`
}

func newReport(cfg Config, tgt target, fx *fixture, setup time.Duration, a *attackResult, v *verification) *Report {
	m := a.metrics
	secs := (m.Duration + m.Wait).Seconds()
	return &Report{
		Target: tgt.base, SKU: fx.sku, Shoppers: len(fx.shoppers), Units: cfg.Units, PerUserLimit: cfg.PerUserLimit,
		Rate: cfg.Rate, Connections: cfg.Connections, SetupSeconds: round(setup.Seconds()),
		Attack: AttackStats{
			StoppedBy: a.stoppedBy, Seconds: round(secs), Requests: m.Requests,
			AttemptsPerSec: round(perSec(float64(m.Requests), secs)),
			AcceptedPerSec: round(perSec(float64(a.tally.accepted), secs)),
			Accepted:       a.tally.accepted,
			LatencyMs: Latency{
				P50: ms(m.Latencies.P50), P90: ms(m.Latencies.P90), P99: ms(m.Latencies.P99),
				Max: ms(m.Latencies.Max), Mean: ms(m.Latencies.Mean),
			},
			StatusCodes: m.StatusCodes, Outcomes: a.tally.outcomes, Errors: transportErrors(m.Errors),
		},
		Stock:      stockStats(cfg, v),
		Lifecycle:  lifecycleStats(v.lifecycle),
		Invariants: v.invariants,
		OK:         len(failed(v.invariants)) == 0,
	}
}

func stockStats(cfg Config, v *verification) StockStats {
	s := v.stock
	if v.lifecycle != nil {
		s = v.lifecycle.stock
	}
	return StockStats{
		Seeded: cfg.Units, Available: s.Available, Sold: s.Sold, Confirmed: s.Confirmed, Paid: s.Paid, Released: s.Released,
		Drained: v.drained, DrainSeconds: round(v.drainTime.Seconds()),
	}
}

func lifecycleStats(lr *lifecycleRun) *LifecycleStats {
	if lr == nil {
		return nil
	}
	return &LifecycleStats{
		PayRatio: lr.ratio, Payers: lr.payers, Paid: len(lr.paid), Late: lr.late, PendingRetries: lr.retries,
		PayOutcomes: lr.outcomes, PaySeconds: round(lr.payTime.Seconds()),
		Expiring: len(lr.expiring), Expired: lr.expired, NoWindow: lr.noWindow,
		ReleasedUnits: lr.stock.Released, Released: lr.released, WaitSeconds: round(lr.waitTime.Seconds()),
	}
}

func perSec(n, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return n / secs
}

func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

// round keeps two decimals: enough for milliseconds and rates.
func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// transportErrors keeps vegeta's errors that are not just an HTTP status
// (those are in the outcomes already), at most 10.
func transportErrors(errs []string) []string {
	var out []string
	for _, e := range errs {
		if len(e) > 4 && e[3] == ' ' && strings.IndexFunc(e[:3], func(r rune) bool { return r < '0' || r > '9' }) < 0 {
			continue // "409 Conflict"
		}
		if out = append(out, e); len(out) == 10 {
			break
		}
	}
	return out
}

// Failure returns one line naming the invariants that failed ("" when all
// held).
func (r *Report) Failure() string {
	var names []string
	for _, i := range failed(r.Invariants) {
		names = append(names, i.Name+" ("+i.Detail+")")
	}
	return strings.Join(names, "; ")
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people: the figures, the outcomes, and
// one PASS/FAIL line per invariant.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	a, s, l := r.Attack, r.Stock, r.Attack.LatencyMs
	fmt.Fprintf(tw, "target\t%s, sku %s\n", r.Target, r.SKU)
	fmt.Fprintf(tw, "sale\t%d units, per-shopper limit %s, %d shoppers (setup %.1fs)\n", r.Units, limitText(r.PerUserLimit), r.Shoppers, r.SetupSeconds)
	fmt.Fprintf(tw, "attack\t%.2fs, %s, stopped by %s\n", a.Seconds, modeText(r.Rate, r.Connections), a.StoppedBy)
	fmt.Fprintf(tw, "throughput\t%.1f attempts/s, %.1f accepted/s (%d requests)\n", a.AttemptsPerSec, a.AcceptedPerSec, a.Requests)
	fmt.Fprintf(tw, "latency\tp50 %.2fms, p90 %.2fms, p99 %.2fms, max %.2fms (mean %.2fms)\n", l.P50, l.P90, l.P99, l.Max, l.Mean)
	fmt.Fprintf(tw, "stock\tseeded %d, available %d, sold %d, confirmed %d, paid %d, released %d\n",
		s.Seeded, s.Available, s.Sold, s.Confirmed, s.Paid, s.Released)
	fmt.Fprintf(tw, "writer\tdrained %s after %.2fs\n", yesNo(s.Drained), s.DrainSeconds)
	if lc := r.Lifecycle; lc != nil {
		fmt.Fprintf(tw, "payments\t%d of %d payers paid (ratio %.2f) in %.2fs, %d too late, %d retried\n",
			lc.Paid, lc.Payers, lc.PayRatio, lc.PaySeconds, lc.Late, lc.PendingRetries)
		fmt.Fprintf(tw, "expiry\t%d of %d unpaid orders expired, %d units released (all in time: %s) after %.2fs; %d without a payment window\n",
			lc.Expired, lc.Expiring, lc.ReleasedUnits, yesNo(lc.Released), lc.WaitSeconds, lc.NoWindow)
	}
	if rm := r.Room; rm != nil {
		fmt.Fprintf(tw, "room\t%d joined (%d early), %d admitted at %.1f/s (set %d/s), challenge %d bits (%.2fms a solve here)\n",
			rm.Joined, rm.Early, rm.Admitted, rm.AdmittedPerSec, rm.AdmitPerSecond, rm.ChallengeBits, rm.SolveMs)
		fmt.Fprintf(tw, "room latency\tjoin p50 %.2fms p99 %.2fms (%d sent again after 503/429); ticket read p50 %.2fms p99 %.2fms (%d reads)\n",
			rm.JoinMs.P50, rm.JoinMs.P99, rm.JoinRetries, rm.TicketMs.P50, rm.TicketMs.P99, rm.TicketReads)
		fmt.Fprintf(tw, "room wait\t%s: %d streams opened, %d events; first event p50 %.2fms p99 %.2fms\n",
			rm.Wait, rm.StreamOpens, rm.StreamEvents, rm.FirstEventMs.P50, rm.FirstEventMs.P99)
	}
	for i, k := range slices.Sorted(maps.Keys(a.Outcomes)) {
		fmt.Fprintf(tw, "%s\t%8d  %s\n", label(i == 0, "outcomes"), a.Outcomes[k], k)
	}
	for i, e := range a.Errors {
		fmt.Fprintf(tw, "%s\t%s\n", label(i == 0, "errors"), e)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "invariants:")
	for _, inv := range r.Invariants {
		verdict := passFail(inv.OK)
		if inv.Skipped {
			verdict = "SKIP"
		}
		fmt.Fprintf(w, "  %s  %s: %s\n", verdict, inv.Name, inv.Detail)
	}
	_, err := fmt.Fprintf(w, "result: %s\n", passFail(r.OK))
	return err
}

func modeText(rate, conns int) string {
	if rate == 0 {
		return fmt.Sprintf("as fast as %d connections go", conns)
	}
	return fmt.Sprintf("%d/s with up to %d connections", rate, conns)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func limitText(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

func label(first bool, s string) string {
	if first {
		return s
	}
	return ""
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}
