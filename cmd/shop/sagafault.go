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
	"github.com/shop-oss/shop/internal/order"
)

// sagaFault is a crash of `shop serve` on purpose in the middle of a
// cross-shard placement, for the drills that show a saga left half done
// loses no unit and sells none twice (`shop serve --saga-fault`, honoured
// only with SHOP_ENV=dev): the n-th placement of the process to reach the
// point kills the whole process with SIGKILL right there, as an
// operator's kill -9 would (no deferred call, no drain, no finishing step).
type sagaFault struct {
	point order.SagaPoint
	n     int64
}

var sagaPoints = []order.SagaPoint{order.SagaAfterHold, order.SagaAfterCommit, order.SagaBeforeFinish}

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
		if order.SagaPoint(point) == p {
			return &sagaFault{point: p, n: n}, nil
		}
	}
	return nil, fmt.Errorf("invalid --saga-fault %q: POINT is after-hold, after-commit or before-finish", spec)
}

// inject arms f on orders: the n-th placement reaching f's point kills
// the process.
func (f *sagaFault) inject(orders *order.Service, log *slog.Logger) {
	var reached atomic.Int64
	orders.InjectSagaFault(func(p order.SagaPoint) {
		if p == f.point && reached.Add(1) == f.n {
			log.Warn("fault injected", "fault", "saga-"+string(p), "placement", f.n, "pid", os.Getpid())
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			// The signal ends every thread; this one must not take
			// another step of the saga meanwhile.
			select {}
		}
	})
}
