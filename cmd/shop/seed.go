package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/inventory"
)

// The demo admin: printed by `shop seed demo`, which runs only in
// development (SHOP_ENV=dev), so these well-known credentials never reach
// a production database by that route.
const (
	demoAdminEmail    = "admin@demo.shop"
	demoAdminPassword = "demo-admin-password"
)

type demoProduct struct {
	sku, name, category string
	price               int64
	stock, limit        int // stock < 0: not on sale
}

var demoCatalog = []demoProduct{
	{"phone-x1", "Phone X1 (flash sale)", "electronics", 49900, 100, 1},
	{"earbuds-pro", "Earbuds Pro", "electronics", 12900, 500, 2},
	{"tee-black", "T-shirt, black", "apparel", 1999, 1000, 0},
	{"hoodie-grey", "Hoodie, grey", "apparel", 4999, 200, 0},
	{"mug-logo", "Mug with logo", "kitchen", 1299, -1, 0},
	{"sticker-pack", "Sticker pack", "misc", 299, -1, 0},
}

func newSeedCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "seed",
		Short: "Load data",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("seed: a subcommand is required: demo")
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "demo",
		Short: "Create a demo admin and a small catalog on sale (idempotent; SHOP_ENV=dev only)",
		Long: "Create the demo admin (" + demoAdminEmail + ") and a small catalog in a few categories, " +
			"and open sale rounds for some products. Running it again changes nothing: existing users, " +
			"products and sale rounds are left as they are.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.seedDemo(cmd.Context()) },
	})
	return cmd
}

func (a *app) seedDemo(ctx context.Context) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	if !cfg.Dev() {
		return errors.New("seed demo: refusing outside development (set SHOP_ENV=dev): the demo admin's password is public")
	}
	log := a.logger(cfg)
	st, err := openStores(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.openCache(ctx, cfg); err != nil {
		return err
	}
	if _, err := database.Migrate(ctx, st.db); err != nil {
		return err
	}
	svc := auth.New(st.db, st.redis, authConfig(cfg), log, nil)
	if _, err := svc.CreateUser(ctx, demoAdminEmail, demoAdminPassword, "Demo admin", auth.RoleAdmin); err != nil &&
		!errors.Is(err, auth.ErrEmailTaken) {
		return fmt.Errorf("seed demo: admin: %w", err)
	}
	catalog := newCatalog(st, cfg, log, nil)
	sales := inventory.NewSales(st.db, inventory.NewStock(st.redis, cfg.KeyPrefix))
	for _, p := range demoCatalog {
		if err := seedProduct(ctx, catalog, sales, p); err != nil {
			return fmt.Errorf("seed demo: %s: %w", p.sku, err)
		}
	}
	return printDemo(a.stdout)
}

// seedProduct creates p if it is missing and opens its sale if it never had
// one, so a second run neither duplicates nor restocks anything.
func seedProduct(ctx context.Context, catalog *inventory.Catalog, sales *inventory.Sales, p demoProduct) error {
	_, err := catalog.Create(ctx, p.sku, inventory.ProductInput{
		Name: p.name, Description: "Demo product.", Category: p.category, PriceCents: p.price,
	})
	if err != nil && !errors.Is(err, inventory.ErrSKUTaken) {
		return err
	}
	if p.stock < 0 {
		return nil
	}
	rep, err := sales.Report(ctx, p.sku)
	if err != nil || rep.RoundID != nil {
		return err
	}
	_, err = sales.Open(ctx, p.sku, inventory.Seed{Quantity: p.stock, PerUserLimit: p.limit})
	return err
}

func printDemo(w io.Writer) error {
	_, err := fmt.Fprintf(w, "demo data ready: admin %s / %s; %d products (phone-x1: 100 units, 1 per shopper)\n",
		demoAdminEmail, demoAdminPassword, len(demoCatalog))
	return err
}
