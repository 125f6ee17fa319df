package bench

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, na},
		{"only n/a", []float64{na, na}, na},
		{"one", []float64{3}, 3},
		{"odd", []float64{5, 1, 3}, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5},
		{"n/a skipped", []float64{na, 10, 20, na, 30}, 20},
	} {
		got := median(tc.in)
		if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("%s: median(%v) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestRatioHalfAndFormats(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{
		{1000, 4000, "0.25"},
		{1, 3, "0.333"},
		{5, 0, "n/a"},
		{na, 2, "n/a"},
		{2, na, "n/a"},
	} {
		if got := num(ratio(tc.a, tc.b)); got != tc.want {
			t.Errorf("ratio(%v, %v) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   float64
		want int
	}{{3001.7, 1500}, {1, 0}, {0, 0}, {na, 0}, {-4, 0}} {
		if got := half(tc.in); got != tc.want {
			t.Errorf("half(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		got, want string
	}{
		{num(12.34567), "12.346"}, {num(7), "7"}, {num(na), "n/a"},
		{fixed(0.5, 2), "0.50"}, {whole(41.6), "42"}, {whole(na), "n/a"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}
