package shoptest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

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

// CleanAudits runs two Audits that fail the test at the first audit
// that errs or is not clean (an audit during the sale); wait returns how
// many clean audits ran.
func CleanAudits(t testing.TB, start, stop <-chan struct{}, auditor func() *audit.Auditor) (wait func() int64) {
	var clean atomic.Int64
	waitAudits := Audits(2, start, stop, auditor, func(rep audit.Report, err error) bool {
		if err != nil || !rep.OK {
			t.Errorf("audit during the sale: %v %+v", err, rep.Problems)
			return false
		}
		clean.Add(1)
		return true
	})
	return func() int64 {
		waitAudits()
		return clean.Load()
	}
}
