// Package order places orders, carries them through the order stream, and
// persists them to PostgreSQL exactly once.
//
// # Placing
//
// Placing an order (buy-now or checkout) is one run of this package's
// reserve-and-enqueue script (reserve.lua): the stock decision, the order
// event (XADD to the order stream), the pending status and the idempotency
// record happen in one atomic step, under an order id made here before the
// script runs. The answer is 202 "pending".
//
// The script lives here, not in inventory, because what it makes is an
// order: the event and status formats, the stream, the buyer's pending
// index and the idempotency records are this package's, and the one script
// that writes them should sit beside the writer that reads them. The stock
// rule it applies is inventory's, on inventory's keys: the sale state and
// buyer counts are handed in by inventory.Stock's SaleKey and BuyersKey, in
// the format inventory documents, and inventory keeps everything else that
// changes them (seeding, price, close, and Release, the inverse of a
// reservation). Each reserved line publishes the stock it leaves on the
// SKU's changes channel (inventory.Stock.ChangesChannel, in inventory's
// format) in the same step, for the live stock streams. A checkout hands
// in the cart's key too: the script checks
// that it still holds exactly the lines reserved and deletes it in the same
// step (ErrCartChanged otherwise); the cart package owns that hash.
//
// # Writing
//
// The Writer (a consumer group on the stream, built by NewWriter from what
// it needs) turns events into rows: one PostgreSQL transaction per batch,
// inserting with ON CONFLICT (id) DO NOTHING and adding to each sale
// round's sold count, through inventory.RecordSold in the same
// transaction, only what it inserted; COMMIT, then the after-commit hook
// with exactly the orders inserted, then XACK, then the status becomes
// "confirmed". A crash anywhere means redelivery, and redelivery inserts
// nothing twice and calls the hook for nothing. Entries that can never be
// written go to a dead-letter stream; nothing is dropped silently.
//
// Redis keys (all under the configured prefix):
//
//	orders                    the order stream (group "writers")
//	orders:dead               dead letters: the event, its reason, deliveries
//	order:<id>                status hash (user_id, status, items, total_cents,
//	                          created_ms); pending until written, kept a while
//	                          after confirmation
//	orders:pending:{<user>}   the buyer's pending orders (zset by created_ms)
//	idem:{<user>}:<sha256>    Idempotency-Key → order id
package order

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/api"
	"github.com/shop-oss/shop/internal/inventory"
)

// Statuses of an order.
const (
	StatusPending   = "pending"   // reserved, not yet in PostgreSQL
	StatusConfirmed = "confirmed" // persisted by the writer
	StatusRejected  = "rejected"  // could never be written: dead-lettered
)

// How long Redis keeps an order's status and a buyer's idempotency record.
const (
	statusTTL    = 7 * 24 * time.Hour
	confirmedTTL = time.Hour
	idemTTL      = 24 * time.Hour
	group        = "writers"
)

// Errors returned by the service.
var (
	ErrNotFound = api.NewError(api.CodeNotFound, "order not found")
	// ErrProductNotFound answers a purchase of a SKU the catalog lacks.
	ErrProductNotFound = api.NewError(api.CodeNotFound, "product not found")
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
	userID     string
}

// ProductExists tells whether the catalog has a SKU. Placing an order
// asks it only when a SKU has no sale, to answer 404 rather than 409.
type ProductExists func(ctx context.Context, sku string) (bool, error)

// Service places and reads orders.
type Service struct {
	db      *pgxpool.Pool
	rdb     redis.UniversalClient
	stock   *inventory.Stock
	exists  ProductExists
	keys    keys
	log     *slog.Logger
	metrics *placeMetrics
	// quiet reservations publish no stock change: only the reserve
	// benchmark sets it, to measure what publishing costs.
	quiet bool
}

// New returns the order service. Its metrics are registered on reg.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, exists ProductExists,
	prefix string, log *slog.Logger, reg prometheus.Registerer) *Service {
	return &Service{
		db: db, rdb: rdb, stock: stock, exists: exists,
		keys: keys{prefix}, log: log, metrics: newPlaceMetrics(reg),
	}
}

type keys struct{ prefix string }

func (k keys) stream() string          { return k.prefix + "orders" }
func (k keys) dead() string            { return k.prefix + "orders:dead" }
func (k keys) status(id string) string { return k.prefix + "order:" + id }
func (k keys) pending(user string) string {
	return k.prefix + "orders:pending:{" + user + "}"
}

// idem hashes the client's key: any printable text up to 255 bytes becomes
// a short, safe key name.
func (k keys) idem(user, key string) string {
	sum := sha256.Sum256([]byte(key))
	return k.prefix + "idem:{" + user + "}:" + hex.EncodeToString(sum[:16])
}
