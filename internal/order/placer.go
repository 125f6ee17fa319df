package order

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/orderkey"
)

// A Placer reserves an order's lines and enqueues the order, all or
// nothing. New takes one from Options.Placer (internal/order/saga's on a
// Redis Cluster), else places with one run of reserve.lua. Both keep the
// contract that the saga package's placer_test.go runs against each.
type Placer interface {
	Place(ctx context.Context, user string, lines []Line, o PlaceOptions) (Placed, error)
	// Exists says whether the order an idempotency record names exists:
	// a replay answers only then.
	Exists(ctx context.Context, id string) (bool, error)
}

// scriptPlacer places an order in one run of reserve.lua (reserve.go).
type scriptPlacer struct{ *Service }

func (p scriptPlacer) Place(ctx context.Context, user string, lines []Line, o PlaceOptions) (Placed, error) {
	res, err := p.placeOne(ctx, user, lines, o)
	return Placed{OrderID: res.orderID, Status: StatusPending, Replayed: res.replayed}, err
}

// Exists: the script writes the idempotency record with the order.
func (scriptPlacer) Exists(context.Context, string) (bool, error) { return true, nil }

// Kit is what a placer outside this package builds an order with: the
// service's stores, key names and settings, and its own few steps.
type Kit struct {
	Redis redis.UniversalClient
	// Reserve runs the stock-taking scripts (Options.ReserveRedis).
	Reserve redis.Scripter
	Stock   *inventory.Stock
	Keys    orderkey.Keys // the order keys' names
	Log     *slog.Logger
	// StatusTTL is a new order's status lifetime, PaymentTTL its payment
	// window (0: none).
	StatusTTL, PaymentTTL time.Duration
	// Erased is the member of a buyer's pending index that marks them
	// erased (CancelUnpaid).
	Erased string
	s      *Service
}

// CheckLines refuses lines no placement takes (none, too many, a bad or
// repeated line).
func (Kit) CheckLines(lines []Line) error { return checkLines(lines) }

// Fingerprint identifies a placement's request for its Idempotency-Key.
func (Kit) Fingerprint(lines []Line, checkout bool) string { return fingerprint(lines, checkout) }

// Passes is the scripts' argument of the waiting room passes presented.
func (Kit) Passes(passes []string) string { return passArg(passes) }

// Refusal is the error a script's refusal (reason, SKUs) answers.
func (Kit) Refusal(reason string, skus []string) error { return rejection(reason, skus) }

// Script is a stock-taking script of body's own steps after the rule they
// share with reserve.lua (lines.lua).
func (Kit) Script(body string) string { return withLines(body) }

// NewOrderID is the id of a new order of user's lines (Service.newOrderID).
func (k Kit) NewOrderID(user string, lines []Line) (string, error) {
	return k.s.newOrderID(user, lines)
}

// LinePlace is where user's line of sku is decided, as reserve.lua's
// keys and channel: the buyer's home bucket as this process last knew the
// round's buckets, and its partition.
func (k Kit) LinePlace(sku, user string) LinePlace { return k.s.linePlace(sku, user) }

// Live reads order id's live status (found false when Redis has none).
func (k Kit) Live(ctx context.Context, id string) (Order, bool, error) {
	return k.s.liveStatus(ctx, id)
}

// Cancel cancels user's order id, as Service.Cancel.
func (k Kit) Cancel(ctx context.Context, user, id string) (Order, error) {
	return k.s.Cancel(ctx, user, id)
}

// Reserved is a placing script's reply as reserve.lua gives it (the
// saga's commit.lua answers the same): the order reserved, or the
// earlier one a repeat names (Replayed).
type Reserved struct {
	OrderID    string
	Replayed   bool
	ItemsJSON  string
	TotalCents int64
	CreatedAt  time.Time
}

// ParseReply reads reply, the answer to placing order id; a refusal is
// the error the buyer gets.
func ParseReply(id string, reply []string) (Reserved, error) {
	r, err := parseReply(id, reply)
	return Reserved{OrderID: r.orderID, Replayed: r.replayed, ItemsJSON: r.itemsJSON, TotalCents: r.totalCents,
		CreatedAt: r.createdAt}, err
}
