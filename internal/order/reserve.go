package order

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/telemetry"
)

var (
	//go:embed reserve.lua
	reserveBody   string
	reserveLua    = withLines(reserveBody)
	reserveScript = redis.NewScript(reserveLua)
)

// Limits on one placement, checked before the script runs. The cart's caps
// are the same numbers.
const (
	MaxLines    = 100
	MaxQuantity = 10000
)

// The largest order, MaxLines lines of MaxQuantity units at the catalog's
// highest price, must stay exact in the reserve script's Lua numbers
// (doubles, exact up to 2^53): a rounded total would fail the writer's
// check that it is the sum of its lines, and the order would be
// dead-lettered with its stock taken. This does not compile otherwise.
const _ = uint64(1<<53 - MaxLines*MaxQuantity*inventory.MaxPriceCents)

// Errors a placement is refused with. They are *apperr.Error values, so the
// HTTP layer answers them as they are; the answers carry the SKUs
// (extension member "skus").
var (
	ErrSaleNotActive = apperr.NewError(apperr.CodeSaleNotActive, "the sale is not open")
	ErrLimitExceeded = apperr.NewError(apperr.CodeLimitExceeded, "over the per-user purchase limit")
	ErrOutOfStock    = apperr.NewError(apperr.CodeOutOfStock, "not enough stock")
)

// ErrIdempotencyKeyReused: the Idempotency-Key was used before by the same
// user for a different request (another SKU, quantity or route); nothing
// was done.
var ErrIdempotencyKeyReused = apperr.NewError(apperr.CodeIdempotencyReused,
	"this Idempotency-Key was used for a different request")

// ErrCartChanged: a checkout's cart changed between reading it and the
// reservation; nothing was reserved, and the caller reads the cart again.
var ErrCartChanged = errors.New("order: the cart changed during checkout")

// noSaleError: a SKU has no sale round, either because the product does
// not exist or because no stock was ever seeded. explain, which can ask
// the catalog, tells the two apart.
type noSaleError struct{ skus []string }

func (e *noSaleError) Error() string { return fmt.Sprintf("order: no sale for %v", e.skus) }

// Line is one SKU and quantity of a placement.
type Line struct {
	SKU      string
	Quantity int
}

// ReservedItem is one reserved line, with the unit price and sale round the
// script read from the live state when it ran. It is the shape of an item
// in the order event.
type ReservedItem struct {
	SKU        string `json:"sku"`
	Quantity   int    `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
	RoundID    int64  `json:"round_id"`
	// Released is how many units the round had given back (cancelled and
	// expired orders) when this line was reserved: the round can sell its
	// quantity plus those, which is what PostgreSQL checks (inventory.Sold).
	Released int64 `json:"released,omitempty"`
	// Buckets is how many stock buckets the line's round had (absent: 1):
	// the line was taken from the buyer's home bucket of that many
	// (inventory.HomeIn), whose partition is the line's on a cluster.
	Buckets int `json:"buckets,omitempty"`
}

// enqueue is one run of the reserve script: the order's own keys, which
// this package owns, and the optional cart guard, whose key is the cart's.
type enqueue struct {
	orderID, userID string
	idemKey         string          // the idempotency record; "" for none
	fingerprint     string          // of the request, kept with idemKey
	cartKey         string          // for a checkout, the buyer's cart; "" for a buy-now
	passes          string          // the waiting room passes presented (passArg)
	checks          *onetrip.Checks // deferred to run first in the same call; nil: none
}

// reservation is what the script did.
type reservation struct {
	orderID string
	// replayed is true when the idempotency key had been used, or this
	// order id had already been reserved (the same call run twice): nothing
	// was reserved now and orderID is the first request's order.
	replayed bool
	// itemsJSON is the reserved lines as the script encoded them, left
	// undecoded: no caller reads them (the tests do, reserve_test.go's
	// items), and decoding them was a tenth of a purchase's CPU in the
	// server (issue 16).
	itemsJSON  string
	totalCents int64
	createdAt  time.Time
	expiresAt  time.Time // zero: no payment window
}

// reserve checks and takes stock for every line and enqueues the order, all
// or nothing, in one atomic script. It returns ErrSaleNotActive,
// ErrPassRequired, ErrLimitExceeded or ErrOutOfStock naming the SKUs, ErrCartChanged, or a
// *noSaleError; any other error means Redis failed and nothing is known to
// have happened beyond what an idempotent retry will tell.
func (s *Service) reserve(ctx context.Context, e enqueue, lines []Line) (reservation, error) {
	if err := checkLines(lines); err != nil {
		return reservation{}, err
	}
	// Every key goes in KEYS; an unused one names a key never touched.
	status := s.keys.Status(e.orderID)
	idemKey, _ := optionalKey(e.idemKey, status+":noidem")
	cartKey, useCart := optionalKey(e.cartKey, status+":nocart")
	fingerprint := ""
	if e.idemKey != "" {
		if fingerprint = e.fingerprint; fingerprint == "" {
			return reservation{}, fmt.Errorf("reserve order %s: an idempotency key without a fingerprint", e.orderID)
		}
	}
	home := homeOfLines(s.keys, lines)
	keys := make([]string, 0, 6+3*len(lines))
	keys = append(keys, s.keys.Stream(home), status, s.keys.Pending(e.userID), idemKey, cartKey, s.keys.Due(home))
	args := make([]any, 0, 12+3*len(lines))
	args = append(args, e.orderID, e.userID, s.statusTTL().Milliseconds(), idemTTL.Milliseconds(),
		fingerprint, useCart, s.paymentTTL.Milliseconds(), home, len(lines))
	for _, l := range lines {
		at := s.linePlace(l.SKU, e.userID) // the buyer's home bucket
		keys = append(keys, at.Sale, at.Buyers, at.Passes)
		args = append(args, l.SKU, l.Quantity, at.Channel)
	}
	args = append(args, reserveDeadline(ctx), e.passes, telemetry.Traceparent(ctx))
	reply, err := s.runReserve(ctx, e.checks, keys, args)
	if err != nil {
		return reservation{}, fmt.Errorf("reserve order %s: %w", e.orderID, err)
	}
	return parseReply(e.orderID, reply)
}

// LinePlace is where a buyer's line of a SKU is decided: their home
// bucket (inventory.Home), the room passes read there, and the channel
// the stock it leaves is published on (” for a service built quiet: the
// events-off side of the reserve benchmark).
type LinePlace struct {
	inventory.Home
	Passes string
}

// linePlace is user's LinePlace for sku, as this process last knew the
// round's buckets.
func (s *Service) linePlace(sku, user string) LinePlace {
	at := LinePlace{Home: s.stock.HomeOf(sku, user), Passes: s.passesKey(sku)}
	if at.Bucket != 0 && s.stock.Partitions().Grouped() {
		// A cluster's script may read only its own slot's keys: the
		// passes a room admits to the bucket's shoppers are kept there.
		at.Passes = at.Sale + ":room:passes"
	}
	if s.quiet {
		at.Channel = ""
	}
	return at
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

func parseReply(orderID string, reply []string) (reservation, error) {
	if len(reply) < 2 {
		return reservation{}, fmt.Errorf("reserve order %s: short reply %q", orderID, reply)
	}
	switch reply[0] {
	case "dup":
		return reservation{orderID: reply[1], replayed: true}, nil
	case "fail":
		return reservation{}, rejection(reply[1], reply[2:])
	case "ok":
		if len(reply) != 5 {
			break
		}
		r := reservation{orderID: orderID, itemsJSON: reply[1]}
		r.totalCents, _ = strconv.ParseInt(reply[2], 10, 64)
		ms, _ := strconv.ParseInt(reply[3], 10, 64)
		r.createdAt = time.UnixMilli(ms).UTC()
		if exp, _ := strconv.ParseInt(reply[4], 10, 64); exp > 0 {
			r.expiresAt = time.UnixMilli(exp).UTC()
		}
		return r, nil
	}
	return reservation{}, fmt.Errorf("reserve order %s: unexpected reply %q", orderID, reply)
}

// replySlack is how long before the caller's deadline the script must
// run: the reply's way back, and the clocks' disagreement.
const replySlack = 500 * time.Millisecond

// reserveDeadline is the last moment, in ms by Redis's clock, at which the
// script may still reserve: a call that runs later has been answered 503
// (its caller gave up), so it must take nothing. It assumes the shop's
// and Redis's clocks agree to well within replySlack. 0: no deadline.
func reserveDeadline(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return d.Add(-replySlack).UnixMilli()
}

// errLate: the script ran past its deadline and reserved nothing.
var errLate = apperr.Unavailable("the store answered too late; nothing was reserved; retry")

func rejection(reason string, skus []string) error {
	switch reason {
	case "late":
		return errLate
	case "erased":
		return ErrBuyerErased
	case "no_sale":
		return &noSaleError{skus: skus}
	case "cart_changed":
		return ErrCartChanged
	case "idem_reused":
		return ErrIdempotencyKeyReused
	case "not_active":
		return withSKUs(ErrSaleNotActive, skus)
	case "pass":
		return withSKUs(ErrPassRequired, skus)
	case "limit":
		return withSKUs(ErrLimitExceeded, skus)
	case "stock":
		return withSKUs(ErrOutOfStock, skus)
	case "short":
		return &shortError{skus: skus}
	case "bucket":
		return &wrongBucketError{skus: skus}
	}
	return errors.New("reserve: unknown rejection " + reason)
}

func withSKUs(base *apperr.Error, skus []string) error { return base.With("skus", skus) }

// checkoutFingerprint is every checkout's: its request has no parameters
// (the cart is the user's), so a repeat with the key is the same request.
const checkoutFingerprint = "checkout"

// fingerprint identifies a placement's request for its Idempotency-Key: the
// route and, for a buy-now, the SKU and quantity (docs/api.md: "the same
// request (same route, same SKU and quantity)").
func fingerprint(lines []Line, checkout bool) string {
	if checkout {
		return checkoutFingerprint
	}
	h := sha256.New()
	for _, l := range lines {
		fmt.Fprintf(h, "%s\x00%d\x00", l.SKU, l.Quantity)
	}
	return "purchase:" + hex.EncodeToString(h.Sum(nil)[:16])
}
