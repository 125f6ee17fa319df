package bench

import (
	"bufio"
	"sort"
	"strconv"
	"strings"
)

// histogram is one histogram's cumulative bucket counts by upper bound
// ("+Inf" included), summed over the series that matched.
type histogram map[string]float64

// snapshot is the server's own account so far: the purchase route's
// latency, the one script call's, the writer's batches and PostgreSQL's
// commits.
type snapshot struct {
	purchase, script        histogram
	batches, batchedEntries float64
	commits                 float64
}

// parseMetrics reads the lines of the server's /metrics a snapshot needs.
func parseMetrics(text string) snapshot {
	s := snapshot{purchase: histogram{}, script: histogram{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:i], "{")
		switch name {
		case "shop_http_request_duration_seconds_bucket":
			if strings.Contains(labels, `method="POST"`) && purchaseRoute(labels) {
				s.purchase[label(labels, "le")] += v
			}
		case "shop_reserve_script_seconds_bucket":
			s.script[label(labels, "le")] += v
		case "shop_order_writer_batch_size_count":
			s.batches += v
		case "shop_order_writer_batch_size_sum":
			s.batchedEntries += v
		}
	}
	return s
}

func purchaseRoute(labels string) bool {
	return strings.HasSuffix(label(labels, "route"), "purchase")
}

// label is one label's value in a series' `a="x",b="y"}` text.
func label(labels, name string) string {
	_, rest, ok := strings.Cut(labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// quantileMs is quantile q of what a histogram counted between two
// snapshots, in ms, interpolated within its bucket; n/a when it counted
// nothing or q falls past the last finite bound.
func quantileMs(before, after histogram, q float64) float64 {
	total := after["+Inf"] - before["+Inf"]
	if total <= 0 {
		return na
	}
	var edges []float64
	for le := range after {
		if le == "+Inf" {
			continue
		}
		if x, err := strconv.ParseFloat(le, 64); err == nil {
			edges = append(edges, x)
		}
	}
	sort.Float64s(edges)
	want := q * total
	prev, lo := 0.0, 0.0
	for _, e := range edges {
		key := strconv.FormatFloat(e, 'g', -1, 64)
		cnt := after[key] - before[key]
		if cnt >= want {
			width := 1.0
			if cnt > prev {
				width = cnt - prev
			}
			return 1000 * (lo + (e-lo)*(want-prev)/width)
		}
		prev, lo = cnt, e
	}
	return na
}

// serverView is the server's account of one window: its own p50, p90
// and p99 of a purchase (ms), the share over 10 ms, orders per writer
// batch, PostgreSQL commits per purchase and the script call's p50, p99.
type serverView struct {
	run                  int
	P50, P90, P99        float64
	Over10ms             float64
	PerBatch, CommitsPer float64
	ScriptP50, ScriptP99 float64
}

// viewOf diffs two snapshots around a window of n purchases; false when
// the server counted no purchase in it.
func viewOf(before, after snapshot, n float64) (serverView, bool) {
	total := after.purchase["+Inf"] - before.purchase["+Inf"]
	if total <= 0 {
		return serverView{}, false
	}
	v := serverView{
		P50:       quantileMs(before.purchase, after.purchase, 0.5),
		P90:       quantileMs(before.purchase, after.purchase, 0.9),
		P99:       quantileMs(before.purchase, after.purchase, 0.99),
		Over10ms:  (total - (after.purchase["0.01"] - before.purchase["0.01"])) / total,
		ScriptP50: quantileMs(before.script, after.script, 0.5),
		ScriptP99: quantileMs(before.script, after.script, 0.99),
	}
	if b := after.batches - before.batches; b > 0 {
		v.PerBatch = (after.batchedEntries - before.batchedEntries) / b
	}
	if n > 0 {
		v.CommitsPer = (after.commits - before.commits) / n
	}
	return v, true
}
