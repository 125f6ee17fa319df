package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// GetConfig is a read load (`shop loadtest get`): GETs of one path with the
// attack's machinery (vegeta, the same transport and loopback guard, open
// or closed model), nothing set up and no invariants. make bench fires it
// at a product and at /healthz with the same connections, to tell what a
// product read costs over the bare HTTP stack.
type GetConfig struct {
	// Target is the shop's base URL; AllowRemote permits a non-loopback one.
	Target      string
	AllowRemote bool
	// Path is the request path, with an optional query ("/healthz").
	Path string
	// Rate, Connections, Duration and Timeout are as in Config.
	Rate        int
	Connections int
	Duration    time.Duration
	Timeout     time.Duration
	// Addresses spreads the requests over this many X-Forwarded-For
	// addresses (198.18.0.0/15, round-robin), for a server that trusts this
	// host as a proxy and limits per client; 0 sends none.
	Addresses int
	// Expect is the status every answer must have (default 200).
	Expect int
}

// GetReport is a read load's outcome; its JSON form is stable (make bench
// reads it).
type GetReport struct {
	Target      string         `json:"target"`
	Path        string         `json:"path"`
	Rate        int            `json:"rate"`
	Connections int            `json:"connections"`
	Seconds     float64        `json:"seconds"`
	Requests    uint64         `json:"requests"`
	PerSec      float64        `json:"requests_per_sec"`
	LatencyMs   Latency        `json:"latency_ms"`
	StatusCodes map[string]int `json:"status_codes"`
	Errors      []string       `json:"errors,omitempty"`
	// OK: every request was answered with Expect.
	OK bool `json:"ok"`
}

// Validate checks every bound and reports the first one broken, by flag name.
func (c *GetConfig) Validate() error {
	if c.Target == "" {
		return errors.New("--target is required")
	}
	if err := checkPath(c.Path); err != nil {
		return err
	}
	checks := []struct {
		bad bool
		msg string
	}{
		{c.Rate < 0 || c.Rate > MaxRate, fmt.Sprintf("--rate must be 0 (as fast as possible) to %d", MaxRate)},
		{c.Connections < 1 || c.Connections > MaxConnections, fmt.Sprintf("--connections must be 1 to %d", MaxConnections)},
		{c.Duration < time.Second || c.Duration > MaxDuration, fmt.Sprintf("--duration must be 1s to %s", MaxDuration)},
		{c.Timeout <= 0 || c.Timeout > time.Minute, "--timeout must be more than 0 and at most 1m"},
		{c.Addresses < 0 || c.Addresses > MaxUsers, fmt.Sprintf("--addresses must be 0 to %d", MaxUsers)},
		{c.Expect != 0 && (c.Expect < 100 || c.Expect > 599), "--expect must be an HTTP status"},
	}
	for _, ch := range checks {
		if ch.bad {
			return errors.New(ch.msg)
		}
	}
	return nil
}

// checkPath accepts an absolute path with an optional query, nothing that
// names another host or scheme: the load goes to the target only.
func checkPath(p string) error {
	u, err := url.Parse(p)
	if err != nil || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || u.Scheme != "" || u.Host != "" || u.Fragment != "" {
		return fmt.Errorf("--path %q must be a path on the target, like /healthz", p)
	}
	return nil
}

// Get fires GETs of cfg.Path at the target for cfg.Duration. It returns an
// error when the load could not be carried out (bad config, refused
// target, interrupted); a wrong status is in the report (OK false).
func Get(ctx context.Context, cfg GetConfig) (*GetReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Expect == 0 {
		cfg.Expect = http.StatusOK
	}
	tgt, err := resolveTarget(ctx, cfg.Target, cfg.AllowRemote)
	if err != nil {
		return nil, err
	}
	atk := vegeta.NewAttacker(attackerOptions(tgt, Config{Rate: cfg.Rate, Connections: cfg.Connections, Timeout: cfg.Timeout})...)
	results := atk.Attack(getTargeter(tgt, cfg.Path, cfg.Addresses), vegeta.ConstantPacer{Freq: cfg.Rate, Per: time.Second},
		cfg.Duration, "shop-loadtest-get")
	var m vegeta.Metrics
	interrupted := collect(ctx, atk, results, m.Add, nil, nil)
	m.Close()
	if interrupted {
		return nil, fmt.Errorf("read load interrupted after %d requests: %w", m.Requests, ctx.Err())
	}
	return newGetReport(cfg, tgt, &m), nil
}

// getTargeter hands out GETs of path, round-robin over addrs
// X-Forwarded-For addresses when addrs > 0.
func getTargeter(tgt target, path string, addrs int) vegeta.Targeter {
	url := tgt.url(path)
	forwarded := make([][]string, addrs)
	for i := range forwarded {
		forwarded[i] = []string{shopperAddr(i).String()}
	}
	var seq atomic.Uint64
	return func(t *vegeta.Target) error {
		t.Method, t.URL, t.Body = http.MethodGet, url, nil
		if addrs > 0 {
			n := seq.Add(1)
			t.Header = http.Header{"X-Forwarded-For": forwarded[n%uint64(addrs)]}
		}
		return nil
	}
}

func newGetReport(cfg GetConfig, tgt target, m *vegeta.Metrics) *GetReport {
	secs := (m.Duration + m.Wait).Seconds()
	expect := fmt.Sprint(cfg.Expect)
	return &GetReport{
		Target: tgt.base, Path: cfg.Path, Rate: cfg.Rate, Connections: cfg.Connections,
		Seconds: round(secs), Requests: m.Requests, PerSec: round(perSec(float64(m.Requests), secs)),
		LatencyMs: Latency{
			P50: ms(m.Latencies.P50), P90: ms(m.Latencies.P90), P99: ms(m.Latencies.P99),
			Max: ms(m.Latencies.Max), Mean: ms(m.Latencies.Mean),
		},
		StatusCodes: m.StatusCodes,
		Errors:      transportErrors(m.Errors),
		OK:          m.Requests > 0 && m.StatusCodes[expect] == int(m.Requests),
	}
}

// WriteJSON writes the report as one indented JSON object.
func (r *GetReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people.
func (r *GetReport) WriteText(w io.Writer) error {
	l := r.LatencyMs
	fmt.Fprintf(w, "target      %s, GET %s\n", r.Target, r.Path)
	fmt.Fprintf(w, "load        %.2fs, %s\n", r.Seconds, modeText(r.Rate, r.Connections))
	fmt.Fprintf(w, "throughput  %.1f requests/s (%d requests)\n", r.PerSec, r.Requests)
	fmt.Fprintf(w, "latency     p50 %.2fms, p90 %.2fms, p99 %.2fms, max %.2fms (mean %.2fms)\n", l.P50, l.P90, l.P99, l.Max, l.Mean)
	fmt.Fprintf(w, "statuses    %v\n", r.StatusCodes)
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error       %s\n", e)
	}
	_, err := fmt.Fprintf(w, "result: %s\n", passFail(r.OK))
	return err
}
