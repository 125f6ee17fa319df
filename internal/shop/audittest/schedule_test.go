package audittest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/lock"
)

// Three instances on a schedule audit about once an interval between
// them, not three times, and each run is kept as the latest outcome with
// its problems; `shop audit` and the admin route are kept the same way.
func TestScheduledAuditsRunOnceAnInterval(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	ctx, cancel := context.WithCancel(context.Background())
	const interval = 200 * time.Millisecond
	var wg sync.WaitGroup
	locks := lock.New(s.Redis.Client, s.Config.KeyPrefix)
	runs := make(chan time.Time, 100)
	for i := range 3 {
		time.Sleep(time.Duration(i) * interval / 3) // ticks out of step
		a := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log)
		a.LagBound = 0 // b's unwritten order is a problem at once
		a.AfterRun = func() { runs <- time.Now() }
		wg.Add(1)
		go func() { defer wg.Done(); a.Every(ctx, locks, interval) }()
	}
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	close(runs)
	n := len(runs)
	t.Logf("%d scheduled audits", n)
	// 2 s / 200 ms = 10 intervals; three instances each running every
	// tick would make about 30.
	if n < 4 || n > 14 {
		t.Errorf("%d scheduled audits in 2 s at a %v interval among three instances, want about 10", n, interval)
	}
	last, ok, err := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log).Latest(context.Background())
	if err != nil || !ok || last.Problems == 0 || time.Since(last.At) > time.Second {
		t.Fatalf("latest outcome %+v (kept %v, %v), want a recent one with b's missing order", last, ok, err)
	}
	s.audit(t) // LagBound 0 too
	if again, _, _ := audit.New(s.DB.Pool, s.Redis.Client, s.Stock, s.Config.KeyPrefix, s.Log).Latest(context.Background()); !again.At.After(last.At) {
		t.Errorf("a run on demand was not kept: %+v after %+v", again, last)
	}
}
