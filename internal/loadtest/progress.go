package loadtest

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// bar is a progress bar on a terminal, or nothing: every method is a no-op
// on a nil *bar, so callers never check whether progress is shown.
type bar struct{ pb *progressbar.ProgressBar }

func newBar(w io.Writer, max int, desc string, opts ...progressbar.Option) *bar {
	if w == nil {
		return nil
	}
	opts = append([]progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
	}, opts...)
	return &bar{pb: progressbar.NewOptions(max, opts...)}
}

// newCountBar counts items done out of max.
func newCountBar(w io.Writer, max int, what string) *bar {
	return newBar(w, max, what, progressbar.OptionShowCount())
}

// attackSteps is the resolution of the attack bar.
const attackSteps = 1000

// newAttackBar shows how far the attack is, in time or in units sold,
// whichever is further: it ends at the duration or when stock runs out.
func newAttackBar(w io.Writer) *bar {
	return newBar(w, attackSteps, "attack", progressbar.OptionSetPredictTime(false))
}

func (b *bar) add(n int) {
	if b != nil {
		_ = b.pb.Add(n)
	}
}

// attackProgress updates the attack bar.
func (b *bar) attackProgress(elapsed, duration time.Duration, sold, units, requests int) {
	if b == nil {
		return
	}
	frac := max(elapsed.Seconds()/duration.Seconds(), float64(sold)/float64(units))
	rate := float64(requests) / max(elapsed.Seconds(), 1e-3)
	b.pb.Describe(fmt.Sprintf("attack: %d sold of %d, %.0f req/s", sold, units, rate))
	_ = b.pb.Set(min(int(frac*attackSteps), attackSteps))
}

// set shows n done, described by desc.
func (b *bar) set(n int, desc string) {
	if b != nil {
		b.pb.Describe(desc)
		_ = b.pb.Set(n)
	}
}

func (b *bar) finish() {
	if b != nil {
		_ = b.pb.Finish()
	}
}
