package order

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/onetrip"
	"github.com/shop-oss/shop/internal/outage"
)

// placeTimeout bounds the reservation script's round trip: under an outage
// the buyer gets a quick 503, never a hang.
const placeTimeout = 2 * time.Second

// Placed is the answer to a purchase or checkout.
type Placed struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	// Replayed: the Idempotency-Key (or this very call) was seen before;
	// nothing new was bought.
	Replayed bool `json:"-"`
}

// PlaceOptions are the optional parts of a placement.
type PlaceOptions struct {
	// IdemKey, when set, makes a repeat by the same user return the first
	// answer and buy nothing more.
	IdemKey string
	// CartKey, for a checkout, is the Redis key of the buyer's cart (the
	// cart package's): it must still hold exactly the lines (else
	// ErrCartChanged) and is emptied in the same atomic step.
	CartKey string
	// Checks, when set, are the request's checks deferred to run with its
	// reservation (onetrip.Of); nil: they ran up front.
	Checks *onetrip.Checks
	// Passes are the buyer's waiting room passes (the X-Queue-Pass
	// header): a line of a round with a room needs the buyer's live pass
	// of it among them, else the placement is refused ErrPassRequired.
	Passes []string
}

// Place reserves every line for user and enqueues the order, all or nothing.
// Errors: ErrSaleNotActive, ErrPassRequired, ErrLimitExceeded,
// ErrOutOfStock (naming the SKUs), ErrProductNotFound (buy-now of an unknown SKU), ErrCartChanged (a
// checkout whose cart changed: read it again), or a 503 when Redis does not
// answer. On a Redis Cluster (grouped partitions) it is a saga (internal/order/saga): the
// order is still all or nothing, but a checkout buys the cart as it was read
// (it is not refused with ErrCartChanged) and takes out of the cart only the
// lines that still hold the quantities bought.
// More in docs/design/order.md ("place.go").
func (s *Service) Place(ctx context.Context, user string, lines []Line, o PlaceOptions) (Placed, error) {
	rctx, cancel := context.WithTimeout(ctx, placeTimeout)
	defer cancel()
	start := time.Now()
	res, err := s.placer.Place(rctx, user, lines, o)
	s.metrics.script.Observe(time.Since(start).Seconds())
	if answer := checksRefusal(o.Checks, err); answer != nil {
		return Placed{}, answer
	}
	if err != nil {
		err = s.explain(ctx, lines, o, err)
		s.metrics.outcome(err, false)
		return Placed{}, err
	}
	s.metrics.outcome(nil, res.Replayed)
	return res, nil
}

// placeOne places an order on a single Redis: one run of reserve.lua.
func (s *Service) placeOne(ctx context.Context, user string, lines []Line, o PlaceOptions) (reservation, error) {
	id, err := s.newOrderID(user, lines)
	if err != nil {
		return reservation{}, err
	}
	e := enqueue{orderID: id, userID: user, cartKey: o.CartKey, checks: o.Checks, passes: passArg(o.Passes)}
	if o.IdemKey != "" {
		e.idemKey = s.keys.Idem(user, o.IdemKey)
		e.fingerprint = fingerprint(lines, o.CartKey != "")
	}
	return s.reserveInBuckets(ctx, e, lines)
}

// newOrderID makes the id of an order of these lines before it is
// reserved (so a second run of the same reservation is recognised): a
// UUIDv7, stamped on a cluster with the order's home partition, whose slot
// its status hash shares.
func (s *Service) newOrderID(user string, lines []Line) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("order id: %w", err)
	}
	if len(lines) == 0 { // refused by reserve's checks
		return id.String(), nil
	}
	// The first line's bucket's partition: a buy-now commits in one step.
	return s.keys.Parts().Stamp(id, s.linePlace(lines[0].SKU, user).Partition).String(), nil
}

// explain turns a reservation error into the answer the buyer gets.
func (s *Service) explain(ctx context.Context, lines []Line, o PlaceOptions, err error) error {
	var noSale *noSaleError
	switch {
	case errors.As(err, &noSale) && o.CartKey == "":
		return s.explainNoSale(ctx, lines, noSale)
	case errors.As(err, &noSale):
		// A checkout names no product in its URL: a line whose product is
		// gone (or was never on sale) is a sale that is not active.
		return ErrSaleNotActive.With("skus", noSale.skus)
	case isAPIError(err), errors.Is(err, ErrCartChanged):
		return err
	case outage.Is(err):
		s.log.Warn("reserve failed", "err", err)
		return fmt.Errorf("%w: %w", apperr.Unavailable("the order could not be placed now; retry with the same Idempotency-Key"), err)
	default: // a bug (a script error, a reply we cannot read): a logged 500
		return err
	}
}

// explainNoSale: a buy-now of a SKU the catalog does not have is a 404; a
// product that exists but was never put on sale is a sale that is not
// active.
func (s *Service) explainNoSale(ctx context.Context, lines []Line, e *noSaleError) error {
	if len(lines) == 1 && s.exists != nil {
		ok, err := s.exists(ctx, lines[0].SKU)
		if err != nil {
			return fmt.Errorf("is %s in the catalog: %w", lines[0].SKU, err) // the catalog's 503 or 500
		}
		if !ok {
			return ErrProductNotFound
		}
	}
	return ErrSaleNotActive.With("skus", e.skus)
}

func isAPIError(err error) bool {
	var e *apperr.Error
	return errors.As(err, &e)
}

// Replay returns the answer an earlier checkout by user with the
// Idempotency-Key key gave, while its record lasts (idemTTL); ok is false
// when there was none. A checkout of an empty cart asks it, after its
// deferred checks (nil: none).
//
// Errors: the checks' refusal; ErrIdempotencyKeyReused (the key was a
// buy-now's); a 503 when Redis does not answer, or while a repair decides.
func (s *Service) Replay(ctx context.Context, user, key string, checks *onetrip.Checks) (p Placed, ok bool, err error) {
	if err := checks.Settle(); err != nil {
		return Placed{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, placeTimeout)
	defer cancel()
	rec, err := s.rdb.Get(ctx, s.keys.Idem(user, key)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return Placed{}, false, nil
	case err != nil:
		return Placed{}, false, s.unavailable("replay idempotency key", err)
	}
	id, fp, found := strings.Cut(rec, " ")
	if found && fp != checkoutFingerprint {
		return Placed{}, false, ErrIdempotencyKeyReused
	}
	switch ok, err := s.placer.Exists(ctx, id); {
	case err != nil:
		return Placed{}, false, s.unavailable("replay idempotency key", err)
	case !ok:
		return Placed{}, false, nil
	}
	return Placed{OrderID: id, Status: StatusPending, Replayed: true}, true, nil
}
