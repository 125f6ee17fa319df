package shop

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/bestseller"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/ledger"
	"github.com/shop-oss/shop/internal/order/saga"
	"github.com/shop-oss/shop/internal/order/sweeper"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/payment"
)

// BestSellerOrders are persisted orders as the best-seller boards take
// them: the order id (what makes counting idempotent), its creation time
// (what picks the periods) and its units per SKU.
func BestSellerOrders(ps []writer.Persisted) []bestseller.Order {
	out := make([]bestseller.Order, len(ps))
	for i, p := range ps {
		lines := make([]bestseller.Line, len(p.Items))
		for j, it := range p.Items {
			lines[j] = bestseller.Line{SKU: it.SKU, Units: int64(it.Quantity)}
		}
		out[i] = bestseller.Order{ID: p.ID, At: p.CreatedAt, Lines: lines}
	}
	return out
}

// AfterCommit is the order writer's after-commit hook: each order it
// inserted counts on the best-seller boards (once: the boards mark order
// ids, so a retried hook counts nothing twice).
func AfterCommit(boards *bestseller.Service) func(context.Context, []writer.Persisted) error {
	return func(ctx context.Context, ps []writer.Persisted) error {
		_, err := boards.Record(ctx, BestSellerOrders(ps))
		return err
	}
}

// AfterTransition is the order writer's after-transition hook: a
// cancelled, expired or refunded order's units leave the best-seller boards (once: TakeBack
// marks order ids, so a transition delivered again takes nothing twice).
func AfterTransition(boards *bestseller.Service) func(context.Context, []writer.Transition) error {
	return func(ctx context.Context, ts []writer.Transition) error {
		var back []bestseller.Order
		for _, t := range ts {
			if order.GivenBack(t.Status) {
				back = append(back, BestSellerOrders([]writer.Persisted{{ID: t.OrderID, CreatedAt: t.CreatedAt, Items: t.Items}})...)
			}
		}
		if len(back) == 0 {
			return nil
		}
		_, err := boards.TakeBack(ctx, back)
		return err
	}
}

// PaymentProvider is the provider SHOP_PAYMENT_PROVIDER names (config
// validates it): the built-in test provider, or Stripe.
func PaymentProvider(cfg *config.Config) order.PaymentProvider {
	if cfg.PaymentProvider == "stripe" {
		return Stripe(cfg)
	}
	return order.NewTestProvider()
}

// Authorizer is the provider of the draws' holds as cfg names it.
func Authorizer(cfg *config.Config) order.Authorizer {
	if cfg.PaymentProvider == "stripe" {
		return Stripe(cfg)
	}
	return order.NewTestProvider()
}

// Stripe is the Stripe provider of cfg's settings.
func Stripe(cfg *config.Config) *payment.Stripe {
	return payment.NewStripe(payment.StripeOptions{SecretKey: cfg.StripeSecretKey, APIURL: cfg.StripeAPIURL,
		Currency: cfg.Currency})
}

// NewSweeper builds the expiry sweeper under the singleton lock, for
// `shop serve` (App.Start) and `shop writer` alike.
func NewSweeper(st Stores, cfg *config.Config, stock *inventory.Stock, locks *lock.Locker,
	log *slog.Logger, reg prometheus.Registerer) *sweeper.Sweeper {
	o := sweeper.Options{Locks: locks}
	if stock.Partitions().Grouped() {
		o.Sagas = saga.NewRepair(st.Redis, stock, cfg.KeyPrefix, log,
			saga.RepairOptions{Persisted: ledger.PersistedIn(st.DB)})
	}
	return sweeper.New(st.Redis, stock, cfg.KeyPrefix, log, reg, o)
}
