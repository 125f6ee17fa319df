// Package order places orders and carries them through the order stream
// and their lifecycle; package writer (internal/order/writer) persists the
// stream to PostgreSQL exactly once, and package saga
// (internal/order/saga) places them on a Redis Cluster (Options.Placer);
// package sweeper (internal/order/sweeper) expires them through Expiry,
// and package orderhttp serves their routes. Package orderkey names its
// Redis keys, and package ledger reads and restores them for an audit or
// a recovery.
//
// The reasoning behind it is in docs/design/order.md.
package order

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/orderkey"
)

// Statuses of an order.
const (
	StatusPending   = "pending"   // reserved, not yet in PostgreSQL
	StatusConfirmed = "confirmed" // persisted by the writer, awaiting payment
	StatusPaid      = "paid"
	StatusCancelled = "cancelled" // by its buyer: the units went back
	StatusExpired   = "expired"   // not paid by expires_at: the units went back
	StatusRefunded  = "refunded"  // paid, then paid back by an admin: the units went back
	StatusRejected  = "rejected"  // could never be written: dead-lettered
	// StatusAborted is the tombstone the saga repair leaves on the home of
	// an order that never committed (internal/order/saga). It has no
	// items, so every reader of statuses sees no order.
	StatusAborted = "aborted"
)

// Final returns an order's final state once next is known after
// recorded: the first final state stands (a redelivered or late event
// changes nothing), except that a refund follows the payment it undoes.
// Readers that merge PostgreSQL's record with the stream's events (the
// audit, recovery) go by it.
func Final(recorded, next string) string {
	if recorded == "" || recorded == StatusPaid && next == StatusRefunded {
		return next
	}
	return recorded
}

// GivenBack tells whether an order in final state status gave its units
// back (cancelled, expired or refunded): it holds none.
func GivenBack(status string) bool {
	return status == StatusCancelled || status == StatusExpired || status == StatusRefunded
}

// How long Redis keeps an order's status and a buyer's idempotency record.
// The status hash is the guard of every lifecycle step, so it lives at
// least a day past the payment window (Service.statusTTL).
const (
	statusTTL = 7 * 24 * time.Hour
	idemTTL   = IdemTTL
)

// IdemTTL is how long an idempotency record lives, and the saga's
// tombstone of an aborted order id (internal/order/saga).
const IdemTTL = 24 * time.Hour

// StreamGroup is the consumer group the order writers share on every
// partition's stream.
const StreamGroup = "writers"

const group = StreamGroup

// StatusTTL is how long a status hash lives unless a payment window asks
// for longer: the writer keeps it on the orders it marks rejected.
const StatusTTL = statusTTL

// Errors returned by the service.
var (
	ErrNotFound = apperr.NewError(apperr.CodeNotFound, "order not found")
	// ErrProductNotFound answers a purchase of a SKU the catalog lacks.
	ErrProductNotFound = apperr.NewError(apperr.CodeNotFound, "product not found")
	// ErrBuyerErased answers a purchase whose buyer was erased while it
	// was on its way (CancelUnpaid): a 401, as their revoked session is.
	ErrBuyerErased = apperr.NewError(apperr.CodeUnauthorized, "the account was erased")
)

// Item is one line of an order.
type Item struct {
	SKU        string `json:"sku"`
	Quantity   int    `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
}

// Order is an order as its buyer sees it.
type Order struct {
	ID         string    `json:"order_id"`
	Status     string    `json:"status"`
	Items      []Item    `json:"items"`
	TotalCents int64     `json:"total_cents"`
	CreatedAt  time.Time `json:"created_at"`
	// ExpiresAt is the end of the payment window, fixed when the order
	// was accepted; nil when the accepting instance had none.
	ExpiresAt *time.Time `json:"expires_at"`
	PaidAt    *time.Time `json:"paid_at"`
	// Payment is what the provider said of the order's payment: the one
	// it was paid with, else its latest attempt; nil before any.
	Payment    *Payment `json:"payment"`
	userID     string
	partition  int            // of the order stream its events go to
	lines      []ReservedItem // with their rounds, from the live status
	paymentRef string
}

// ProductExists tells whether the catalog has a SKU. Placing an order
// asks it only when a SKU has no sale, to answer 404 rather than 409.
type ProductExists func(ctx context.Context, sku string) (bool, error)

// Service places and reads orders.
type Service struct {
	db  *pgxpool.Pool
	rdb redis.UniversalClient
	// reserveRdb runs the reserve script: rdb, or its auto-pipeliner.
	reserveRdb redis.Scripter
	// placer places orders: one script, or a saga on a cluster (placer.go).
	placer  Placer
	stock   *inventory.Stock
	exists  ProductExists
	keys    orderkey.Keys
	log     *slog.Logger
	metrics *placeMetrics
	life    *lifecycle

	paymentTTL time.Duration
	payments   PaymentProvider
	restore    func(ctx context.Context, id string) error // Options.Restore
	// betweenReads, for tests, is called between the Redis and the
	// PostgreSQL read of an order (Get, a lifecycle step, on a miss in
	// Redis) or of a buyer's orders (List).
	betweenReads func()

	// quiet reservations publish no stock change: only the reserve
	// benchmark sets it, to measure what publishing costs.
	quiet bool
}

// Options are the optional parts of the Service; the zero value is the
// defaults.
type Options struct {
	// PaymentTTL is the payment window of the orders this instance
	// accepts (0: none, orders never expire).
	PaymentTTL time.Duration
	// Payments is the payment provider (nil: the test provider).
	Payments PaymentProvider
	// ReserveRedis runs the reserve script: an auto-pipeliner of the
	// service's Redis client (nil: the client itself); every other command
	// stays on the client.
	ReserveRedis redis.Scripter
	// Placer builds the placer on the service's Kit: internal/order/saga's
	// on a Redis Cluster (nil: one run of reserve.lua, on a single Redis).
	Placer func(Kit) Placer
	// Restore writes the Redis status of written order id back from
	// PostgreSQL, as PostgreSQL records its state (internal/order/ledger's
	// Restorer): a refund of a paid order Redis forgot takes the guarded
	// step of any other (nil: such a refund answers 503).
	Restore func(ctx context.Context, id string) error
}

// New returns the order service. Its metrics are registered on reg.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, exists ProductExists,
	prefix string, log *slog.Logger, reg prometheus.Registerer, o Options) *Service {
	s := &Service{
		db: db, rdb: rdb, reserveRdb: cmp.Or[redis.Scripter](o.ReserveRedis, rdb), stock: stock, exists: exists,
		keys: orderkey.New(prefix, stock.Partitions()), log: log,
		metrics: newPlaceMetrics(reg), paymentTTL: max(o.PaymentTTL, 0), payments: o.Payments,
		life: newLifecycle(rdb, stock, prefix, log), restore: o.Restore,
	}
	if s.payments == nil {
		s.payments = NewTestProvider()
	}
	s.placer = Placer(scriptPlacer{s})
	if o.Placer != nil {
		s.placer = o.Placer(Kit{Redis: rdb, Reserve: s.reserveRdb, Stock: stock, Keys: s.keys,
			Log: log, StatusTTL: s.statusTTL(), PaymentTTL: s.paymentTTL,
			Erased: erasedMember, s: s})
	}
	return s
}

// statusTTL is how long a new order's status hash lives: a week, and at
// least a day past its payment window.
func (s *Service) statusTTL() time.Duration { return max(statusTTL, s.paymentTTL+24*time.Hour) }

// homeOfLines is the partition of an order with these lines: its first
// SKU's. The order's events (the order itself, then its transitions) all
// go to that partition's stream, so one consumer group sees them in order.
func homeOfLines(k orderkey.Keys, lines []Line) int { return k.Parts().Of(lines[0].SKU) }

// erasedMember, in a buyer's pending index with the score +inf, marks
// the buyer erased (CancelUnpaid): every placement writes that index in
// the step that accepts the order, and refuses to once it is there.
// Readers of the index ask for finite scores only, and no order id looks
// like it.
const erasedMember = "~erased"
