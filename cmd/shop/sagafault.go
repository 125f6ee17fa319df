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
	"github.com/shop-oss/shop/internal/order/saga"
)

// sagaFault is a crash of `shop serve` on purpose in the middle of a
// cross-shard placement, for the drills that show a saga left half done
// loses no unit and sells none twice (`shop serve --saga-fault`, honoured
// only with SHOP_ENV=dev): the n-th placement of the process to reach the
// point kills the whole process with SIGKILL right there, as an
// operator's kill -9 would (no deferred call, no drain, no finishing step).
type sagaFault struct {
	point saga.Point
	n     int64
}

var sagaPoints = []saga.Point{saga.AfterHold, saga.AfterCommit, saga.BeforeFinish}

// parseSagaFault reads POINT:N, e.g. after-hold:1; it refuses it outside
// SHOP_ENV=dev, as writerFault does.
func parseSagaFault(spec string, cfg *config.Config) (*sagaFault, error) {
	if spec == "" {
		return nil, nil
	}
	if !cfg.Dev() {
		return nil, fmt.Errorf("--saga-fault is for fault drills: it needs SHOP_ENV=dev")
	}
	point, count, ok := strings.Cut(spec, ":")
	n, err := strconv.ParseInt(count, 10, 64)
	if !ok || err != nil || n < 1 {
		return nil, fmt.Errorf("invalid --saga-fault %q: want POINT:N with N >= 1, e.g. after-hold:1", spec)
	}
	for _, p := range sagaPoints {
		if saga.Point(point) == p {
			return &sagaFault{point: p, n: n}, nil
		}
	}
	return nil, fmt.Errorf("invalid --saga-fault %q: POINT is after-hold, after-commit or before-finish", spec)
}

// inject arms f on placer: the n-th placement reaching f's point kills
// the process. On a single Redis (no saga) no placement reaches one.
func (f *sagaFault) inject(placer *saga.Placer, log *slog.Logger) {
	if placer == nil {
		return
	}
	var reached atomic.Int64
	placer.InjectFault(func(p saga.Point) {
		if p == f.point && reached.Add(1) == f.n {
			log.Warn("fault injected", "fault", "saga-"+string(p), "placement", f.n, "pid", os.Getpid())
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			// The signal ends every thread; this one must not take
			// another step of the saga meanwhile.
			select {}
		}
	})
}
