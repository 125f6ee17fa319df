package order

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
)

// The tests here that sweep due orders run the sweeper
// (internal/order/sweeper), which imports this package: they reach it
// through NewSweeper, which sweeperhook_ext_test.go (package order_test)
// sets, as writerhook_test.go does for the writer. The names are the
// sweeper's of before it moved, so those tests read as they did.

// SweeperOptions are the sweeper.Options these tests set.
type SweeperOptions struct {
	Batch    int
	Interval time.Duration
	Lease    time.Duration
}

// Sweeper is a *sweeper.Sweeper as these tests drive it.
type Sweeper interface {
	Run(ctx context.Context) error
	Sweep(ctx context.Context) (int, error)
	SettleOwed(ctx context.Context) (int, error)
	InjectClaimFault(f func() error)
}

// NewSweeper is sweeper.New.
var NewSweeper func(rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger,
	reg prometheus.Registerer, o SweeperOptions) Sweeper
