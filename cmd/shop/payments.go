package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/draw"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/payment"
	"github.com/shop-oss/shop/internal/shop"
)

func newPaymentsCmd(a *app) *cobra.Command {
	var since time.Duration
	reconcile := &cobra.Command{
		Use:   "reconcile",
		Short: "Repair what lost payment webhooks left behind; exit 1 when something could not be repaired",
		Long: "Applies the recorded webhook events that were never applied, then lists the provider's " +
			"payment intents created in the last --since and repairs each succeeded one whose order was not " +
			"paid with it, as its webhook would have: the order becomes paid if it still can, else the " +
			"payment is refunded in full. Each intent of a draw entry (a hold) is applied as its webhook " +
			"would have been: an authorizing entry enters or is lost, a hold no entry needs is cancelled, " +
			"a succeeded or cancelled hold its entry contradicts is reported. One line per repair. Needs SHOP_PAYMENT_PROVIDER=stripe.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since <= 0 {
				return errors.New("payments reconcile: --since must be positive")
			}
			return a.onStores(cmd.Context(), true, func(cfg *config.Config, log *slog.Logger, st *stores) error {
				if cfg.PaymentProvider != "stripe" {
					return errors.New("payments reconcile: SHOP_PAYMENT_PROVIDER is not stripe: the test provider keeps no list to reconcile with")
				}
				stripe := shop.Stripe(cfg)
				stock := shop.NewStock(st.shop(), cfg)
				catalog := shop.NewCatalog(st.shop(), cfg, log, nil)
				orders := order.New(st.db, st.redis, stock, catalog.Exists, cfg.KeyPrefix, log, newRegistry(),
					order.Options{PaymentTTL: cfg.PaymentTTL, Payments: stripe})
				draws := draw.New(st.db, stripe, log, draw.Options{})
				hook := payment.NewWebhook(st.db, cfg.StripeWebhookSecret, orders, log, newRegistry()).ForEntries(draws)
				if err := payment.Reconcile(cmd.Context(), stripe, hook, orders, time.Now().Add(-since), a.stdout); err != nil {
					return fmt.Errorf("payments reconcile: %w", err)
				}
				return nil
			})
		},
	}
	readsSettings(reconcile, migratedSettings, orderSettings, []string{"SHOP_STRIPE_WEBHOOK_SECRET"})
	reconcile.Flags().DurationVar(&since, "since", 24*time.Hour, "how far back to list the provider's payment intents")
	return parentCmd("payments", "Maintain payments taken through the payment provider", reconcile)
}
