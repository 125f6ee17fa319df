package bench

import (
	"math"
	"sort"
	"strconv"
)

// na is a figure a phase could not give (a failed run, a zero baseline);
// medians skip it and tables print it as n/a.
var na = math.NaN()

// median is the middle of the figures that are not n/a, the mean of the
// two middle ones for an even count.
func median(vs []float64) float64 {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return na
	}
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// medianOf is median over one field of each run's record.
func medianOf[T any](rows []T, field func(T) float64) float64 {
	vs := make([]float64, len(rows))
	for i, r := range rows {
		vs[i] = field(r)
	}
	return median(vs)
}

// ratio is a/b, n/a without a baseline.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
		return na
	}
	return a / b
}

// half is half of a rate, whole requests a second.
func half(rate float64) int {
	if math.IsNaN(rate) || rate <= 0 {
		return 0
	}
	return int(rate / 2)
}

// num prints a figure with at most three decimals, n/a for none.
func num(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// fixed prints a figure with exactly d decimals, n/a for none.
func fixed(v float64, d int) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// whole prints a figure rounded to a whole number, n/a for none.
func whole(v float64) string { return fixed(v, 0) }
