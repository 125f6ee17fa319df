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
// On a Redis Cluster (grouped partitions) those keys span slots, so a
// placement is a saga instead (saga.go): the Idempotency-Key is claimed in
// the user's slot first; each partition other than the order's home takes
// its lines into a hold (hold.lua); the home takes its own lines and
// appends the order event, status and due entry (commit.lua: the one
// commit point); then the pending index and the cart are updated in the
// user's slot (and, when a crash skipped that, by a checkout's repeat of
// its Idempotency-Key: sagafinish.go). A refusal gives the holds back and is answered as above; a
// crash between hold and commit is settled by the sweeper (repair.go).
// There a checkout buys the cart as it was read (never ErrCartChanged) and
// removes from it the lines that still hold the quantities bought.
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
// written go to a dead-letter stream, and their orders become "rejected"
// whenever the entry names its order and buyer; nothing is dropped
// silently. Housekeeping trims what is written and removes the consumers
// of dead writers once they hold nothing.
//
// # Lifecycle
//
// pending (accepted, in Redis) → confirmed (persisted) → paid, or
// cancelled by the buyer, or expired when not paid by expires_at (fixed by
// the reserve script: created + the accepting instance's payment window,
// none when it is 0). Every change is one atomic step on the order's
// status hash, which is the guard of them all:
//
//   - Pay (pay.lua) moves confirmed → paid only before expires_at by
//     Redis's clock, after the provider charged with an idempotency key
//     (order id and token): a retried pay never charges twice, and a
//     payment that loses the race is refunded.
//   - Cancel and expiry give the units back through inventory's Release
//     with a Guard on the status (pending or confirmed → cancelled or
//     expired), so the units go back exactly once and never for a paid
//     order; of a cancel, an expiry and a payment racing, one wins.
//   - The Sweeper claims due orders from a sorted set by expires_at in
//     small batches (one script, with a lease) and expires them. Every
//     instance runs one, under the lock of internal/lock for efficiency
//     only: two at once still release each order once (the guard).
//
// PostgreSQL hears of each change from the same stream the orders travel
// on: the step itself adds a transition event (pay.lua's XADD; Release's
// outbox entry), so no crash can separate the change from its record. The
// writer records transitions idempotently (order_transitions, keyed by
// order id) and hands them to its after-transition hook (best sellers take
// cancelled and expired orders back). A PostgreSQL outage delays the
// record and loses nothing. The writer confirms only a pending status, so
// an order cancelled before its row was written stays cancelled.
//
// On a Redis Cluster an order's status hash, its home partition's stream
// and due set and the home's SKUs share one slot (see the key list), so
// pay.lua and the guarded release of an order whose lines all lie in its
// home stay one step each. What spans slots is split, ordered so that a
// stop in between is repaired:
//
//   - The writer's confirm and dead-letter steps take the order off its
//     buyer's pending index (the buyer's slot) first, then ack and mark
//     the status in the partition's slot (writer_cluster.go); a stop in
//     between is repaired by the redelivery. There a dead letter keeps a
//     final status (paid, cancelled, expired) rather than overwrite it.
//   - An order with lines in several partitions (a cross-shard checkout)
//     is cancelled or expired by the guarded release of its home's lines,
//     the one decision, then one release per other partition, with an
//     owed set that lets the sweeper finish a stopped one (owed.go).
//
// Redis keys (all under the configured prefix), per order partition P
// (keyspace.Partitions: "orders" alone is partition 0 on a single Redis,
// the layout of before partitions; else "orders:{<P's tag>}"):
//
//	<P>                       the partition's order stream (group "writers"):
//	                          order events and transition events (kind=transition)
//	<P>:dead                  dead letters: the event, its reason, deliveries
//	<P>:due                   orders awaiting payment (zset by expires_ms;
//	                          a claimed one scored by its lease's end)
//	order:<id>                status hash (user_id, status, items, total_cents,
//	                          created_ms, expires_ms, paid_ms, payment_ref,
//	                          partition: the order's home, see below);
//	                          kept a week, and a day past the payment window;
//	                          on a cluster order:<home's tag><id>; there
//	                          also attempt (the saga run that committed it),
//	                          and a tombstone {status: aborted} (no items,
//	                          so no reader sees an order) marks an order the
//	                          repair undid, for a day; marked deciding while
//	                          the repair asks PostgreSQL whether a failover
//	                          lost a written order's status (readers then
//	                          answer 503, or PostgreSQL's row)
//	<P>:hold:<id>             on a cluster, the lines a saga took on P for an
//	                          order homed elsewhere (hash: attempt, user,
//	                          home, items, deadline_ms), until the commit or
//	                          the repair ends it
//	<P>:holds                 those holds by deadline (zset, order ids)
//	<P>:settled               on a cluster, the holds dropped because their
//	                          order committed (zset of {order_id, user,
//	                          items} JSON by when, kept SettledRetention):
//	                          the audit's record, in P's slot, that those
//	                          units are an order's (internal/audit)
//	<P>:releases              on a cluster, the releases in P of lines of
//	                          orders homed elsewhere that gave units back
//	                          (stream: order_id, skus; kept SettledRetention):
//	                          the audit's record of when they joined P's
//	                          released sets (internal/audit)
//	<P>:owed                  on a cluster, orders with lines in other
//	                          partitions whose release may be unfinished
//	                          (zset by when a sweeper may finish it; owed.go)
//
// An order's home partition is its first SKU's (Partitions.Of); its event,
// its due entry and every transition event go there, so the partition's
// consumer group sees the order before its transitions. The home is kept
// in the status hash (no field: partition 0). A partition's tag depends on
// the count, so the count is fixed once orders exist (SettlePartitions):
// only 1 may be raised, on a single Redis, whose partition 0 keeps the
// untagged stream. On a cluster the SKUs' sale keys carry their
// partition's tag (inventory), so the reservation and the XADD share a
// slot, and the order id carries its home (keyspace's Stamp, made before
// the reservation from the first SKU), so the status hash, named from the
// id alone, lives in the home's slot too.
//
//	orders:pending:{<user>}   the buyer's pending orders (zset by created_ms)
//	idem:{<user>}:<sha256>    Idempotency-Key → '<order id> <fingerprint>'
//	                          (on a cluster claimed before the order exists:
//	                          it answers only for an order whose status does)
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
	"github.com/shop-oss/shop/internal/keyspace"
)

// Statuses of an order.
const (
	StatusPending   = "pending"   // reserved, not yet in PostgreSQL
	StatusConfirmed = "confirmed" // persisted by the writer, awaiting payment
	StatusPaid      = "paid"
	StatusCancelled = "cancelled" // by its buyer: the units went back
	StatusExpired   = "expired"   // not paid by expires_at: the units went back
	StatusRejected  = "rejected"  // could never be written: dead-lettered
)

// How long Redis keeps an order's status and a buyer's idempotency record.
// The status hash is the guard of every lifecycle step, so it lives at
// least a day past the payment window (Service.statusTTL).
const (
	statusTTL = 7 * 24 * time.Hour
	idemTTL   = 24 * time.Hour
	group     = "writers"
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
	// ExpiresAt is the end of the payment window, fixed when the order
	// was accepted; nil when the accepting instance had none.
	ExpiresAt  *time.Time `json:"expires_at"`
	PaidAt     *time.Time `json:"paid_at"`
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
	// gate, when set, may run a request's reservation with its first
	// checks (WithGate, gate.go).
	gate    func(context.Context) Gate
	stock   *inventory.Stock
	exists  ProductExists
	keys    keys
	log     *slog.Logger
	metrics *placeMetrics
	life    *lifecycle

	paymentTTL time.Duration
	payments   PaymentProvider
	// holdLifetime is how long a saga's hold waits for its commit
	// (WithHoldLifetime).
	holdLifetime time.Duration
	// sagaFault, for the fault drills, is called at each SagaPoint a
	// placement reaches (InjectSagaFault); nil otherwise.
	sagaFault func(SagaPoint)
	// betweenReads, for tests, is called between the Redis and the
	// PostgreSQL read of an order (Get, a lifecycle step, on a miss in
	// Redis) or of a buyer's orders (List).
	betweenReads func()

	// quiet reservations publish no stock change: only the reserve
	// benchmark sets it, to measure what publishing costs.
	quiet bool
}

// Option sets an optional part of the Service.
type Option func(*Service)

// WithPaymentTTL sets the payment window of the orders this instance
// accepts (0, the default: none, orders never expire).
func WithPaymentTTL(d time.Duration) Option { return func(s *Service) { s.paymentTTL = max(d, 0) } }

// WithPayments sets the payment provider (default: the test provider).
func WithPayments(p PaymentProvider) Option { return func(s *Service) { s.payments = p } }

// WithStockChanged sets the hook called with the SKUs whose available
// stock a cancellation (or an expiry found by a payment) gave units back
// to, after the step: where live-stock events are published. It must not
// block for long; it may be nil.
func WithStockChanged(f StockChanged) Option { return func(s *Service) { s.life.changed = f } }

// WithReserveRedis runs the reserve script on c, an auto-pipeliner of the
// service's Redis client (nil: the client itself); every other command
// stays on the client.
func WithReserveRedis(c redis.Scripter) Option {
	return func(s *Service) {
		if c != nil {
			s.reserveRdb = c
		}
	}
}

// WithHoldLifetime sets how long a cross-shard saga's hold waits for its
// commit before the sweeper's repair may undo it (Redis Cluster only;
// DefaultHoldLifetime when d is not positive). It bounds how long a crash
// between hold and commit keeps units out of stock, and must stay above
// the few seconds a placement may take: a hold that outlives its deadline
// mid-placement is undone and the placement answers 503.
func WithHoldLifetime(d time.Duration) Option {
	return func(s *Service) {
		if d > 0 {
			s.holdLifetime = d
		}
	}
}

// New returns the order service. Its metrics are registered on reg.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, stock *inventory.Stock, exists ProductExists,
	prefix string, log *slog.Logger, reg prometheus.Registerer, opts ...Option) *Service {
	s := &Service{
		db: db, rdb: rdb, reserveRdb: rdb, stock: stock, exists: exists, holdLifetime: DefaultHoldLifetime,
		keys: keys{prefix, stock.Partitions()}, log: log, metrics: newPlaceMetrics(reg),
		life: &lifecycle{log: log, rdb: rdb, stock: stock, keys: keys{prefix, stock.Partitions()}},
	}
	for _, o := range opts {
		o(s)
	}
	if s.payments == nil {
		s.payments = NewTestProvider()
	}
	return s
}

// statusTTL is how long a new order's status hash lives: a week, and at
// least a day past its payment window.
func (s *Service) statusTTL() time.Duration { return max(statusTTL, s.paymentTTL+24*time.Hour) }

type keys struct {
	prefix string
	parts  keyspace.Partitions
}

// partition is the name the keys of order partition p start with: the
// untagged "orders" of before partitions for partition 0 on a single
// Redis, else "orders:" and the partition's tag (the slot its SKUs share
// on a cluster).
func (k keys) partition(p int) string {
	if k.parts.Legacy(p) {
		return k.prefix + "orders"
	}
	return k.prefix + "orders:" + k.parts.Tag(p)
}

func (k keys) stream(p int) string { return k.partition(p) }
func (k keys) dead(p int) string   { return k.partition(p) + ":dead" }
func (k keys) due(p int) string    { return k.partition(p) + ":due" }

// status is order id's status hash. On a cluster it carries the tag of the
// order's home partition, which the id names (keyspace's Stamp), so the
// status shares a slot with the home's stream, due set and SKUs; on a
// single Redis it keeps its old name.
func (k keys) status(id string) string {
	if k.parts.Grouped() {
		return k.prefix + "order:" + k.parts.Tag(k.parts.Home(id)) + id
	}
	return k.prefix + "order:" + id
}

// home is the partition of an order with these lines: its first SKU's.
// The order's events (the order itself, then its transitions) all go to
// that partition's stream, so one consumer group sees them in order.
func (k keys) home(lines []Line) int { return k.parts.Of(lines[0].SKU) }
func (k keys) pending(user string) string {
	return k.prefix + "orders:pending:{" + user + "}"
}

// idem hashes the client's key: any printable text up to 255 bytes becomes
// a short, safe key name.
func (k keys) idem(user, key string) string {
	sum := sha256.Sum256([]byte(key))
	return k.prefix + "idem:{" + user + "}:" + hex.EncodeToString(sum[:16])
}
