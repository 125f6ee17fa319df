package bench

import (
	"encoding/csv"
	"strconv"
	"strings"
)

// parseRedisBenchmark reads redis-benchmark --csv: the second line's
// requests per second.
func parseRedisBenchmark(text string) float64 {
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(recs) < 2 || len(recs[1]) < 2 {
		return na
	}
	v, err := strconv.ParseFloat(recs[1][1], 64)
	if err != nil {
		return na
	}
	return v
}

// wrkReport is what make bench reads of a wrk --latency report and of
// the lines scripts/wrk-purchase.lua's done() adds.
type wrkReport struct {
	PerSec       float64
	P50, P99     float64 // ms
	Statuses     map[int]float64
	SocketErrors float64
	Late         float64
	LateMaxMs    float64
	Non2xx       bool
}

func parseWrk(text string) wrkReport {
	r := wrkReport{PerSec: na, P50: na, P99: na, Late: na, LateMaxMs: na, Statuses: map[int]float64{}}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "Requests/sec:" && len(f) > 1:
			r.PerSec = float(f[1])
		case f[0] == "50%" && len(f) > 1:
			r.P50 = wrkMs(f[1])
		case f[0] == "99%" && len(f) > 1:
			r.P99 = wrkMs(f[1])
		case f[0] == "status" && len(f) > 2:
			if code, err := strconv.Atoi(f[1]); err == nil {
				r.Statuses[code] += float(f[2])
			}
		case f[0] == "late" && len(f) > 2:
			r.Late, r.LateMaxMs = float(f[1]), float(f[2])
		case strings.HasPrefix(line, "  Socket errors:"):
			// "connect C, read R, write W, timeout T"
			for i := 3; i < len(f); i += 2 {
				r.SocketErrors += float(strings.TrimSuffix(f[i], ","))
			}
		case strings.Contains(line, "Non-2xx"):
			r.Non2xx = true
		}
	}
	return r
}

// wrkMs reads a wrk latency ("850.00us", "1.23ms", "2.01s") in ms.
func wrkMs(v string) float64 {
	switch {
	case strings.HasSuffix(v, "us"):
		return float(strings.TrimSuffix(v, "us")) / 1000
	case strings.HasSuffix(v, "ms"):
		return float(strings.TrimSuffix(v, "ms"))
	case strings.HasSuffix(v, "s"):
		return float(strings.TrimSuffix(v, "s")) * 1000
	}
	return float(v)
}

// float reads a number, n/a when it is none.
func float(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return na
	}
	return v
}
