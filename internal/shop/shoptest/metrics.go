package shoptest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Counters are the values of the counters named name in g whose labels
// include the pairs (label, value, label, value, …), in g's order.
func Counters(t testing.TB, g prometheus.Gatherer, name string, labels ...string) []float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue metrics
				}
			}
			out = append(out, m.GetCounter().GetValue())
		}
	}
	return out
}
