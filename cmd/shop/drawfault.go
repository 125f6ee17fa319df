package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/draw"
)

// drawFault is a crash of `shop serve` on purpose in the middle of a draw,
// for the drill that shows a draw resumed after a kill -9 captures no
// winner twice and ends as an uninterrupted one (`shop serve --draw-fault
// after-capture:N`, honoured only with SHOP_ENV=dev): the process's n-th
// capture, answered by the provider and its order written but not yet
// recorded on the entry, kills the process with SIGKILL right there.
type drawFault struct{ n int64 }

// parseDrawFault reads after-capture:N; it refuses it outside SHOP_ENV=dev.
func parseDrawFault(spec string, cfg *config.Config) (*drawFault, error) {
	if spec == "" {
		return nil, nil
	}
	if !cfg.Dev() {
		return nil, fmt.Errorf("--draw-fault is for fault drills: it needs SHOP_ENV=dev")
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(spec, "after-capture:"), 10, 64)
	if !strings.HasPrefix(spec, "after-capture:") || err != nil || n < 1 {
		return nil, fmt.Errorf("invalid --draw-fault %q: want after-capture:N with N >= 1", spec)
	}
	return &drawFault{n: n}, nil
}

// inject arms f on draws.
func (f *drawFault) inject(draws *draw.Service, log *slog.Logger) {
	var captured atomic.Int64
	draws.InjectAfterCapture(func(entryID string) error {
		if captured.Add(1) == f.n {
			log.Warn("fault injected", "fault", "draw-after-capture", "capture", f.n, "entry", entryID, "pid", os.Getpid())
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal ends every thread; this one must not record the capture meanwhile
		}
		return nil
	})
}
