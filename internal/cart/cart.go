// Package cart keeps each shopper's cart in a Redis hash and checks it out
// into the order stream, all or nothing.
//
// The reasoning behind it is in docs/design/cart.md.
package cart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/outage"
)

// Limits of a cart: those of one reservation, so any cart can check out.
const (
	MaxLines    = order.MaxLines
	MaxQuantity = order.MaxQuantity
	// TTL is how long a cart lives after its last change.
	TTL = 24 * time.Hour
)

// Errors returned by the service (wrapped).
var (
	// ErrCartEmpty: a checkout of an empty (or expired) cart.
	ErrCartEmpty = apperr.NewError(apperr.CodeCartEmpty, "the cart is empty")
	// ErrCartBusy: the cart changed under every checkout attempt.
	ErrCartBusy = apperr.NewError(apperr.CodeConflict, "the cart kept changing during checkout; retry")
	// ErrProductNotFound: no product has the sku (or it is malformed).
	ErrProductNotFound = inventory.ErrProductNotFound
	errUnavailable     = apperr.Unavailable("the cart is unavailable; retry shortly")
)

// Cart is a shopper's cart as the API shows it.
type Cart struct {
	Items      []Item `json:"items"`
	TotalCents int64  `json:"total_cents"`
	// UnavailableSKUs are lines whose product no longer exists: not in
	// Items nor in the total, and refused at checkout.
	UnavailableSKUs []string `json:"unavailable_skus,omitempty"`
}

// Item is one line of a cart, priced at the catalog's current price.
type Item struct {
	SKU            string `json:"sku"`
	Name           string `json:"name"`
	PriceCents     int64  `json:"price_cents"`
	Quantity       int    `json:"quantity"`
	LineTotalCents int64  `json:"line_total_cents"`
}

// Catalog is what a cart needs of the catalog: the product with a sku, or
// an error wrapping inventory.ErrProductNotFound when there is none.
// *inventory.Catalog is one.
type Catalog interface {
	Get(ctx context.Context, sku string) (inventory.Product, error)
}

// Service keeps carts and checks them out.
type Service struct {
	rdb     redis.UniversalClient
	catalog Catalog
	orders  *order.Service
	prefix  string
	log     *slog.Logger
	metrics *metrics
	// beforePlace, in tests, runs between reading a cart and placing it.
	beforePlace func()
}

// New returns the cart service whose keys start with prefix. Its metrics
// are registered on reg.
func New(rdb redis.UniversalClient, catalog Catalog, orders *order.Service, prefix string,
	log *slog.Logger, reg prometheus.Registerer) *Service {
	return &Service{rdb: rdb, catalog: catalog, orders: orders, prefix: prefix, log: log, metrics: newMetrics(reg)}
}

// Get returns user's cart (empty when there is none). Errors: a 503 when
// Redis, or the catalog for a product it has not cached, does not answer.
func (s *Service) Get(ctx context.Context, user string) (Cart, error) {
	c, err := s.read(ctx, user)
	s.metrics.op("get", err)
	return c, err
}

// Add adds quantity units of sku to user's cart and returns the cart.
// Errors: ErrProductNotFound, an invalid_request error for a quantity out
// of 1..MaxQuantity, a line that would exceed it or a cart already holding
// MaxLines other lines (nothing changes then), or a 503.
func (s *Service) Add(ctx context.Context, user, sku string, quantity int) (Cart, error) {
	c, err := s.add(ctx, user, sku, quantity)
	s.metrics.op("add", err)
	return c, err
}

func (s *Service) add(ctx context.Context, user, sku string, quantity int) (Cart, error) {
	if quantity < 1 || quantity > MaxQuantity {
		return Cart{}, invalidQuantity(1)
	}
	if err := s.mustExist(ctx, sku); err != nil {
		return Cart{}, err
	}
	if err := s.change(ctx, addScript, user, sku, quantity); err != nil {
		return Cart{}, err
	}
	return s.read(ctx, user)
}

// Set makes sku's line of user's cart hold quantity units (0 removes it)
// and returns the cart. Errors: as Add's, with 0..MaxQuantity; removing
// needs no product, so a line whose product was deleted can be removed.
func (s *Service) Set(ctx context.Context, user, sku string, quantity int) (Cart, error) {
	c, err := s.set(ctx, user, sku, quantity)
	s.metrics.op("set", err)
	return c, err
}

func (s *Service) set(ctx context.Context, user, sku string, quantity int) (Cart, error) {
	if quantity < 0 || quantity > MaxQuantity {
		return Cart{}, invalidQuantity(0)
	}
	if quantity > 0 {
		if err := s.mustExist(ctx, sku); err != nil {
			return Cart{}, err
		}
	}
	if err := s.change(ctx, setScript, user, sku, quantity); err != nil {
		return Cart{}, err
	}
	return s.read(ctx, user)
}

// Remove drops sku's line from user's cart, if it is there, and returns
// the cart. Errors: a 503.
func (s *Service) Remove(ctx context.Context, user, sku string) (Cart, error) {
	c, err := s.remove(ctx, user, sku)
	s.metrics.op("remove", err)
	return c, err
}

func (s *Service) remove(ctx context.Context, user, sku string) (Cart, error) {
	if err := s.change(ctx, setScript, user, sku, 0); err != nil {
		return Cart{}, err
	}
	return s.read(ctx, user)
}

// Clear empties user's cart. Errors: a 503.
func (s *Service) Clear(ctx context.Context, user string) error {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	err := s.rdb.Del(ctx, s.key(user)).Err()
	if err != nil {
		err = s.unavailable("clear cart", err)
	}
	s.metrics.op("clear", err)
	return err
}

// mustExist returns ErrProductNotFound (wrapped) unless the catalog has
// sku, or the catalog's 503.
func (s *Service) mustExist(ctx context.Context, sku string) error {
	if !inventory.ValidSKU(sku) {
		return fmt.Errorf("cart: sku %q: %w", sku, ErrProductNotFound)
	}
	if _, err := s.catalog.Get(ctx, sku); err != nil {
		return fmt.Errorf("cart: %w", err)
	}
	return nil
}

func invalidQuantity(least int) error { return apperr.Invalid(quantityRange(least)) }

func quantityRange(least int) apperr.FieldError {
	return apperr.FieldError{Field: "quantity", Message: fmt.Sprintf("must be an integer from %d to %d", least, MaxQuantity)}
}

// unavailable maps a Redis error: an outage (outage.Is) is a
// 503, logged unless the request was cancelled; anything else (a script
// error, a wrong type) is a bug, returned for the 500 handler to log.
func (s *Service) unavailable(op string, err error) error {
	if !outage.Is(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !errors.Is(err, context.Canceled) {
		s.log.Warn(op, "err", err)
	}
	return fmt.Errorf("%s: %w: %w", op, errUnavailable, err)
}
