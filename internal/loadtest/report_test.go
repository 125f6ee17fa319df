package loadtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func sampleReport(t *testing.T, okSale bool) *Report {
	t.Helper()
	e := sale(50, 2, 2, 2)
	if !okSale {
		e.stock.Confirmed = 3
	}
	a := &attackResult{tally: e.tally, stoppedBy: stopSoldOut}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, lat := range []time.Duration{2, 4, 6, 8} {
		a.metrics.Add(&vegeta.Result{Code: 202, Timestamp: start.Add(time.Duration(i) * 250 * time.Millisecond), Latency: lat * time.Millisecond})
	}
	a.metrics.Add(&vegeta.Result{Code: 0, Timestamp: start.Add(time.Second), Latency: 10 * time.Millisecond, Error: "dial tcp: connection refused"})
	a.metrics.Add(&vegeta.Result{Code: 409, Timestamp: start.Add(time.Second), Latency: time.Millisecond, Error: "409 Conflict"})
	a.metrics.Close()
	v := &verification{stock: e.stock, drained: e.drained, drainTime: 1500 * time.Millisecond, invariants: checkInvariants(e)}
	cfg := Config{Units: 50, PerUserLimit: 2, Rate: 0, Connections: 20}
	fx := &fixture{sku: "lt-x", shoppers: make([]shopper, 2)}
	return newReport(cfg, target{base: "http://127.0.0.1:8080"}, fx, 2*time.Second, a, v)
}

func TestReportJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport(t, true).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	// The fields `make bench` and the e2e test read.
	var got struct {
		OK     bool `json:"ok"`
		Attack struct {
			Requests       int                `json:"requests"`
			Accepted       int                `json:"accepted"`
			AttemptsPerSec float64            `json:"attempts_per_sec"`
			LatencyMs      map[string]float64 `json:"latency_ms"`
			Outcomes       map[string]int     `json:"outcomes"`
			Errors         []string           `json:"errors"`
			StoppedBy      string             `json:"stopped_by"`
		} `json:"attack"`
		Stock      map[string]any `json:"stock"`
		Invariants []Invariant    `json:"invariants"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	a := got.Attack
	if !got.OK || a.Requests != 6 || a.Accepted != 4 || a.StoppedBy != "sold_out" || len(got.Invariants) != 6 {
		t.Errorf("report = %s", buf.String())
	}
	// 6 answers from the first request (t=0) to the last answer (1.01s).
	if a.AttemptsPerSec < 5.9 || a.AttemptsPerSec > 6 {
		t.Errorf("attempts/s = %v, want 6/1.01s", a.AttemptsPerSec)
	}
	if a.LatencyMs["max"] != 10 || a.LatencyMs["p50"] <= 0 || a.LatencyMs["p99"] < a.LatencyMs["p50"] {
		t.Errorf("latency = %v", a.LatencyMs)
	}
	if len(a.Errors) != 1 || a.Errors[0] != "dial tcp: connection refused" {
		t.Errorf("errors = %q, want the transport error only", a.Errors)
	}
	if a.Outcomes["202 accepted"] != 4 || got.Stock["confirmed"] != 4.0 || got.Stock["drain_seconds"] != 1.5 {
		t.Errorf("outcomes %v stock %v", a.Outcomes, got.Stock)
	}
}

func TestReportText(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport(t, true).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"as fast as 20 connections go, stopped by sold_out",
		"p99 ", "4  202 accepted",
		"PASS  no oversell: seeded 50",
		"result: PASS\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "PASS  ") != 6 {
		t.Errorf("want six invariant lines:\n%s", out)
	}
}

func TestReportFailure(t *testing.T) {
	r := sampleReport(t, false)
	if r.OK {
		t.Fatal("a sale with 3 of 4 units confirmed reported OK")
	}
	if f := r.Failure(); !strings.Contains(f, "confirmed once (confirmed 3, sold 4)") || strings.Contains(f, "oversell") {
		t.Errorf("Failure() = %q", f)
	}
	var buf bytes.Buffer
	_ = r.WriteText(&buf)
	if !strings.Contains(buf.String(), "FAIL  after the writer drains") || !strings.HasSuffix(buf.String(), "result: FAIL\n") {
		t.Errorf("text:\n%s", buf.String())
	}
}
