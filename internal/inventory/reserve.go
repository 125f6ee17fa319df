package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shop-oss/shop/internal/api"
)

// Line is one SKU and quantity of a reservation.
type Line struct {
	SKU      string
	Quantity int
}

// Enqueue says where the reservation script hands the order: the keys and
// fields belong to the order package, which owns the stream and its format;
// inventory only runs them in the same atomic step as the stock change.
type Enqueue struct {
	OrderID    string
	UserID     string
	StreamKey  string // the order stream
	StatusKey  string // the order's pending status (hash)
	PendingKey string // the buyer's index of pending orders (zset)
	IdemKey    string // the idempotency record; "" for none
	// CartKey, for a checkout, is the buyer's cart: it must still hold
	// exactly the lines reserved (else ErrCartChanged) and is emptied in
	// the same step. "" for a buy-now.
	CartKey   string
	StatusTTL time.Duration // life of the status and index entries
	IdemTTL   time.Duration // life of the idempotency record
}

// Item is one reserved line, with the unit price and sale round taken from
// the live state when the script ran.
type Item struct {
	SKU        string `json:"sku"`
	Quantity   int    `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
	RoundID    int64  `json:"round_id"`
}

// Reservation is what Reserve did.
type Reservation struct {
	OrderID string
	// Replayed is true when the idempotency key had been used, or this
	// order id had already been reserved (the same call run twice): nothing
	// was reserved now and OrderID is the first request's order.
	Replayed   bool
	Items      []Item
	TotalCents int64
	CreatedAt  time.Time
}

// Reserve checks and takes stock for every line and enqueues the order, all
// or nothing, in one atomic script. It returns ErrSaleNotActive,
// ErrLimitExceeded, an out_of_stock *api.Error naming the SKUs, or a
// *NoSaleError; any other error means Redis failed and nothing is known to
// have happened beyond what an idempotent retry will tell.
func (s *Stock) Reserve(ctx context.Context, e Enqueue, lines []Line) (Reservation, error) {
	if err := checkLines(lines); err != nil {
		return Reservation{}, err
	}
	// Every key goes in KEYS; an unused one names a key never touched.
	idemKey, useIdem := optionalKey(e.IdemKey, e.StatusKey+":noidem")
	cartKey, useCart := optionalKey(e.CartKey, e.StatusKey+":nocart")
	keys := make([]string, 0, 5+2*len(lines))
	keys = append(keys, e.StreamKey, e.StatusKey, e.PendingKey, idemKey, cartKey)
	args := make([]any, 0, 7+2*len(lines))
	args = append(args, e.OrderID, e.UserID, e.StatusTTL.Milliseconds(), e.IdemTTL.Milliseconds(),
		useIdem, useCart, len(lines))
	for _, l := range lines {
		keys = append(keys, s.saleKey(l.SKU), s.buyersKey(l.SKU))
		args = append(args, l.SKU, l.Quantity)
	}
	reply, err := reserveScript.Run(ctx, s.rdb, keys, args...).StringSlice()
	if err != nil {
		return Reservation{}, fmt.Errorf("reserve order %s: %w", e.OrderID, err)
	}
	return parseReply(e.OrderID, reply)
}

func optionalKey(key, unused string) (string, string) {
	if key == "" {
		return unused, "0"
	}
	return key, "1"
}

func checkLines(lines []Line) error {
	if len(lines) == 0 || len(lines) > MaxLines {
		return fmt.Errorf("reserve: %d lines, want 1 to %d", len(lines), MaxLines)
	}
	seen := make(map[string]bool, len(lines))
	for _, l := range lines {
		if l.Quantity < 1 || l.Quantity > MaxQuantity || seen[l.SKU] || l.SKU == "" {
			return fmt.Errorf("reserve: bad line %+v", l)
		}
		seen[l.SKU] = true
	}
	return nil
}

func parseReply(orderID string, reply []string) (Reservation, error) {
	if len(reply) < 2 {
		return Reservation{}, fmt.Errorf("reserve order %s: short reply %q", orderID, reply)
	}
	switch reply[0] {
	case "dup":
		return Reservation{OrderID: reply[1], Replayed: true}, nil
	case "fail":
		return Reservation{}, rejection(reply[1], reply[2:])
	case "ok":
		if len(reply) != 4 {
			break
		}
		r := Reservation{OrderID: orderID}
		if err := json.Unmarshal([]byte(reply[1]), &r.Items); err != nil {
			return Reservation{}, fmt.Errorf("reserve order %s: items: %w", orderID, err)
		}
		r.TotalCents, _ = strconv.ParseInt(reply[2], 10, 64)
		ms, _ := strconv.ParseInt(reply[3], 10, 64)
		r.CreatedAt = time.UnixMilli(ms).UTC()
		return r, nil
	}
	return Reservation{}, fmt.Errorf("reserve order %s: unexpected reply %q", orderID, reply)
}

func rejection(reason string, skus []string) error {
	switch reason {
	case "no_sale":
		return &NoSaleError{SKUs: skus}
	case "cart_changed":
		return ErrCartChanged
	case "not_active":
		return withSKUs(ErrSaleNotActive, skus)
	case "limit":
		return withSKUs(ErrLimitExceeded, skus)
	case "stock":
		return withSKUs(ErrOutOfStock, skus)
	}
	return errors.New("reserve: unknown rejection " + reason)
}

func withSKUs(base *api.Error, skus []string) error { return base.With("skus", skus) }
