package order_test

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/writer"
)

func init() {
	order.NewWriter = func(db *pgxpool.Pool, rdb redis.UniversalClient, prefix string, log *slog.Logger,
		reg prometheus.Registerer, o order.WriterOptions) order.Writer {
		return writer.New(db, rdb, prefix, log, reg, writer.Options{Consumer: o.Consumer, Partitions: o.Partitions,
			Batch: o.Batch, Block: o.Block, MaxDeliveries: o.MaxDeliveries, Concurrency: o.Concurrency})
	}
}
