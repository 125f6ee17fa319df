package order

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/keyspace"
)

// The tests here that need orders persisted run the order writer
// (internal/order/writer), which imports this package: they reach it
// through NewWriter, which writerhook_ext_test.go (package order_test,
// free to import both) sets. The names are the writer's of before it
// moved, so those tests read as they did.

// WriterOptions are the writer.Options these tests set.
type WriterOptions struct {
	Consumer      string
	Partitions    keyspace.Partitions
	Batch         int
	Block         time.Duration
	MaxDeliveries int
	Concurrency   int
}

// Writer is a *writer.Writer as these tests drive it.
type Writer interface {
	Run(ctx context.Context) error
	InjectFaults(beforeCommit, afterCommit func() error)
	InjectAckFault(betweenAcks func() error)
}

// NewWriter is writer.New.
var NewWriter func(db *pgxpool.Pool, rdb redis.UniversalClient, prefix string, log *slog.Logger,
	reg prometheus.Registerer, o WriterOptions) Writer
