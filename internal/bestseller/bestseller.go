// Package bestseller keeps the shop's best-seller boards: units sold per
// SKU in Redis sorted sets, one per UTC day, ISO week and month, and one
// for all time (the seeds' leaderboard pattern).
//
// The reasoning behind it is in docs/design/bestseller.md.
package bestseller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/lock"
)

// Errors of the package (wrapped).
var (
	// ErrNotRanked: the SKU sold no units in the period.
	ErrNotRanked = apperr.NewError(apperr.CodeNotFound, "no units sold in this period")
	// ErrInvalidOrder: an order given to Record or TakeBack is malformed;
	// nothing of the batch was counted.
	ErrInvalidOrder = errors.New("bestseller: invalid order")
	// errRedisDown: Redis did not answer.
	errRedisDown = apperr.Unavailable("the best-seller boards are unreachable; retry shortly")
)

// Bounds of the reads (docs/api.md).
const (
	DefaultLimit  = 10
	MaxLimit      = 100
	DefaultAround = 5
	MaxAround     = 25
)

const (
	// markRetention is how long an order's mark outlives its day.
	markRetention = 35 * 24 * time.Hour
	// recentWindow: orders confirmed this recently may still be waiting
	// for their hook when a rebuild reads them.
	recentWindow = 10 * time.Minute
	// scriptOrders is the most orders one script call handles. Redis
	// runs a script whole while purchases wait behind it: at ~15 µs an
	// order, 16 hold it for ~0.25 ms, where 200 held it for 2–13 ms and
	// showed in the purchases' p99 (BENCHMARKS.md, issue 32).
	scriptOrders = 16
	redisTimeout = 2 * time.Second
	lockName     = "bestsellers-rebuild"
	lockTTL      = 30 * time.Second
)

// Order is what the boards need of a persisted order.
type Order struct {
	ID string
	// At is the order's creation time: it picks the periods.
	At    time.Time
	Lines []Line
}

// Line is units of one SKU in an order.
type Line struct {
	SKU   string
	Units int64
}

// Entry is one SKU on a board.
type Entry struct {
	Rank  int64  `json:"rank"`
	SKU   string `json:"sku"`
	Name  string `json:"name"`
	Units int64  `json:"units"`
}

// Board is the top of a period's board.
type Board struct {
	Period Period  `json:"period"`
	Items  []Entry `json:"items"`
}

// Position is one SKU's place on a board and its neighbours.
type Position struct {
	Period Period  `json:"period"`
	SKU    string  `json:"sku"`
	Rank   int64   `json:"rank"`
	Units  int64   `json:"units"`
	Above  []Entry `json:"above"`
	Below  []Entry `json:"below"`
}

// Result says how many orders of a batch changed the boards (Applied) and
// how many were already counted or taken back (Skipped).
type Result struct{ Applied, Skipped int }

// Service keeps and reads the boards. Make it with New.
type Service struct {
	rdb     redis.UniversalClient
	db      *pgxpool.Pool
	catalog *inventory.Catalog
	locker  *lock.Locker
	keys    keys
	log     *slog.Logger
	m       *metrics
	now     func() time.Time
	// beforeSwap, when set, runs between a rebuild's snapshot and its swap
	// (tests put a racing order there).
	beforeSwap func()
}

// New returns the service: boards in rdb under prefix, names from catalog,
// rebuilds from db under locker.
func New(rdb redis.UniversalClient, db *pgxpool.Pool, catalog *inventory.Catalog, locker *lock.Locker,
	prefix string, log *slog.Logger, reg prometheus.Registerer) *Service {
	return &Service{rdb: rdb, db: db, catalog: catalog, locker: locker, keys: keys{prefix},
		log: log, m: newMetrics(reg), now: time.Now}
}

// redisCtx bounds one Redis step, so an outage answers within seconds.
func redisCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, redisTimeout)
}
