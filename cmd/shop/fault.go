package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/draw"
	"github.com/shop-oss/shop/internal/order/writer"
)

// faultExitCode is what a process killed by SIGKILL reports (128 + 9): a
// fault exit looks like the crash it stands for.
const faultExitCode = 137

// fault is a crash of the order writer on purpose, for the drills that
// show nothing is lost or written twice when one happens (`shop writer
// --fault`, honoured only with SHOP_ENV=dev): at batch n of the process,
// the process exits (os.Exit, no cleanup, no deferred call) or stops
// itself (SIGSTOP, its transaction left open), before COMMIT or after
// COMMIT and before XACK.
type fault struct {
	action string // exit or stop
	point  string // before-commit or after-commit
	n      int64
}

// parseFault reads ACTION-POINT:N, e.g. exit-after-commit:1.
func parseFault(s string) (*fault, error) {
	spec, count, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(count, 10, 64)
	if !ok || err != nil || n < 1 {
		return nil, fmt.Errorf("invalid --fault %q: want ACTION-POINT:N with N >= 1, e.g. exit-after-commit:1", s)
	}
	action, point, _ := strings.Cut(spec, "-")
	if (action != "exit" && action != "stop") || (point != "before-commit" && point != "after-commit") {
		return nil, fmt.Errorf("invalid --fault %q: ACTION is exit or stop, POINT before-commit or after-commit", s)
	}
	return &fault{action: action, point: point, n: n}, nil
}

// inject arms f on w: the n-th batch reaching f's point, counted over all
// of the writer's loops, crashes the process.
func (f *fault) inject(w *writer.Writer, log *slog.Logger) {
	var batches atomic.Int64
	hook := func() error {
		if batches.Add(1) == f.n {
			f.crash(log)
		}
		return nil
	}
	if f.point == "before-commit" {
		w.InjectFaults(hook, nil)
	} else {
		w.InjectFaults(nil, hook)
	}
}

func (f *fault) crash(log *slog.Logger) {
	log.Warn("fault injected", "fault", f.action+"-"+f.point, "batch", f.n, "pid", os.Getpid())
	if f.action == "stop" {
		// Stopped here until SIGCONT, mid-transaction or holding an
		// unacknowledged batch; then it goes on as if nothing happened.
		// The calling thread may run on for a moment after kill(2) before
		// the stop reaches it (long enough for a COMMIT): it waits for the
		// SIGCONT instead.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		defer signal.Stop(cont)
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		<-cont
		return
	}
	os.Exit(faultExitCode)
}

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
