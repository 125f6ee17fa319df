package shoptest

import (
	"context"
	"sync"

	"github.com/shop-oss/shop/internal/audit"
)

// Audits runs n audits side by side, each with its own auditor from
// auditor, again and again from when start is closed until stop is: every
// run's report (or error) goes to each, which ends that audit's loop by
// returning false. wait waits until every loop has ended.
func Audits(n int, start, stop <-chan struct{}, auditor func() *audit.Auditor,
	each func(audit.Report, error) bool) (wait func()) {
	var audits sync.WaitGroup
	for range n {
		audits.Add(1)
		go func() {
			defer audits.Done()
			<-start
			a := auditor()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !each(a.Run(context.Background())) {
					return
				}
			}
		}()
	}
	return audits.Wait
}
