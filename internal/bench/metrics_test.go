package bench

import (
	"math"
	"testing"
)

func metricsText(b001, b0025, b005, b01, inf, s1, sInf, batches, entries string) string {
	return `# HELP shop_http_request_duration_seconds HTTP request latency.
shop_http_request_duration_seconds_bucket{method="GET",route="/healthz",le="0.001"} 999
shop_http_request_duration_seconds_bucket{method="POST",route="/api/v1/products/:sku/purchase",le="0.001"} ` + b001 + `
shop_http_request_duration_seconds_bucket{method="POST",route="/api/v1/products/:sku/purchase",le="0.0025"} ` + b0025 + `
shop_http_request_duration_seconds_bucket{method="POST",route="/api/v1/products/:sku/purchase",le="0.005"} ` + b005 + `
shop_http_request_duration_seconds_bucket{method="POST",route="/api/v1/products/:sku/purchase",le="0.01"} ` + b01 + `
shop_http_request_duration_seconds_bucket{method="POST",route="/api/v1/products/:sku/purchase",le="+Inf"} ` + inf + `
shop_reserve_script_seconds_bucket{le="0.001"} ` + s1 + `
shop_reserve_script_seconds_bucket{le="+Inf"} ` + sInf + `
shop_order_writer_batch_size_count ` + batches + `
shop_order_writer_batch_size_sum ` + entries + `
`
}

func TestServerView(t *testing.T) {
	before := parseMetrics(metricsText("0", "0", "0", "0", "0", "0", "0", "10", "100"))
	before.commits = 50
	after := parseMetrics(metricsText("50", "90", "98", "99", "100", "100", "100", "20", "1100"))
	after.commits = 150
	got, ok := viewOf(before, after, 100)
	if !ok {
		t.Fatal("no view")
	}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"p50", got.P50, 1},   // exactly at the 1 ms bound
		{"p90", got.P90, 2.5}, // exactly at the 2.5 ms bound
		{"p99", got.P99, 10},  // the 99th in the 5-10 ms bucket, its top
		{"over 10 ms", got.Over10ms, 0.01},
		{"per batch", got.PerBatch, 100},
		{"commits", got.CommitsPer, 1},
		{"script p50", got.ScriptP50, 0.5}, // halfway into 0-1 ms
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if !math.IsNaN(quantileMs(before.script, after.script, 0.999)) && got.ScriptP99 != 0.99 {
		t.Errorf("script p99 = %v, want 0.99", got.ScriptP99)
	}
	if _, ok := viewOf(before, before, 100); ok {
		t.Error("no purchases in the window: want no view")
	}
}

func TestQuantileInterpolates(t *testing.T) {
	before := histogram{"0.001": 0, "0.002": 0, "+Inf": 0}
	after := histogram{"0.001": 10, "0.002": 30, "+Inf": 40}
	for _, tc := range []struct{ q, want float64 }{
		{0.25, 1},  // the 10th: the top of the first bucket
		{0.5, 1.5}, // the 20th: halfway through the second
		{0.9, na},  // past the last finite bound
	} {
		got := quantileMs(before, after, tc.q)
		if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("q %v = %v, want %v", tc.q, got, tc.want)
		}
	}
}
