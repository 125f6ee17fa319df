package racetest_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shop-oss/shop/internal/racetest"
)

// Every op runs once, each told its own number, and none is released
// before all have started: each waits at a barrier that opens only when
// all n have reached it, which would block for good if Together ran them
// one after another.
func TestTogetherRunsEveryOpAtOnce(t *testing.T) {
	t.Parallel()
	const n = 50
	var arrived sync.WaitGroup
	arrived.Add(n)
	var seen [n]atomic.Int64
	racetest.Together(racetest.Times(n, func(i int) {
		arrived.Done()
		arrived.Wait()
		seen[i].Add(1)
	})...)
	for i := range seen {
		if got := seen[i].Load(); got != 1 {
			t.Fatalf("op %d ran %d times, want 1", i, got)
		}
	}
}

// Start returns before its ops end: they wait here for the caller, and
// wait waits for them.
func TestStartReturnsWhileTheOpsRun(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var done atomic.Int64
	wait := racetest.Start(racetest.Times(3, func(int) {
		<-release
		done.Add(1)
	})...)
	if d := done.Load(); d != 0 {
		t.Fatalf("%d ops ended before they were let go", d)
	}
	close(release)
	wait()
	if d := done.Load(); d != 3 {
		t.Fatalf("%d ops ended, want 3", d)
	}
}
