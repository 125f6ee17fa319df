package bench

import (
	"slices"
	"testing"
)

func TestWriterRates(t *testing.T) {
	out := `goos: linux
BenchmarkWriterDrain-2   	  200000	      45000 ns/op	     22000 orders/s
BenchmarkWriterCopy-2    	  200000	      30000 ns/op	     33000.5 orders/s
BenchmarkWriterDrain-2   	  200000	      47000 ns/op	     21000 orders/s
BenchmarkWriterDrainBatch-2 1 2 ns/op
ok  	github.com/shop-oss/shop/internal/order/writer	40.1s
`
	drain, copy := writerRates(out)
	if !slices.Equal(drain, []float64{22000, 21000}) || !slices.Equal(copy, []float64{33000.5}) {
		t.Errorf("drain %v copy %v", drain, copy)
	}
	for line, want := range map[string]bool{
		"BenchmarkReserve-2  100 5 ns/op": true, "ok  \tpkg\t1s": true, "FAIL\tpkg": true,
		"goos: linux": false, "    work_bench_test.go:1: x": false,
	} {
		if benchLines(line) != want {
			t.Errorf("benchLines(%q) = %v", line, !want)
		}
	}
}
