package order_test

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/sweeper"
)

func init() {
	order.NewSweeper = func(rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger,
		reg prometheus.Registerer, o order.SweeperOptions) order.Sweeper {
		return sweeper.New(rdb, stock, prefix, log, reg, sweeper.Options{Batch: o.Batch, Interval: o.Interval, Lease: o.Lease})
	}
}
