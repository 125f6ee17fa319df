package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/bestseller"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/pickup"
	"github.com/shop-oss/shop/internal/shop"
)

// The demo admin: printed by `shop seed demo`, which runs only in
// development (SHOP_ENV=dev), so these well-known credentials never reach
// a production database by that route.
const (
	demoAdminEmail    = "admin@demo.shop"
	demoAdminPassword = "demo-admin-password"
)

type demoProduct struct {
	sku, name, category, description string
	price                            int64
	stock, limit                     int // stock < 0: not on sale
}

// demoFlashSale is the demo's flash-sale product, the one the
// walk-through of docs/getting-started.md buys.
const demoFlashSale = "phone-x1"

var demoCatalog = []demoProduct{
	{"phone-x1", "Phone X1 (flash sale)", "electronics",
		"A 6.1-inch phone with a two-day battery and a camera that handles low light. One per shopper while the drop lasts.",
		49900, 100, 1},
	{"earbuds-pro", "Earbuds Pro", "electronics",
		"Wireless earbuds with noise cancelling, eight hours of play and a pocket-sized charging case.",
		12900, 500, 2},
	{"tee-black", "T-shirt, black", "apparel",
		"A heavyweight organic cotton tee with a relaxed fit. Keeps its shape wash after wash.",
		1999, 1000, 0},
	{"hoodie-grey", "Hoodie, grey", "apparel",
		"A brushed-fleece hoodie with a lined hood and a kangaroo pocket. Soft inside, warm on cold mornings.",
		4999, 200, 0},
	{"mug-logo", "Mug with logo", "kitchen",
		"A 350 ml stoneware mug with the shop's logo. Dishwasher and microwave safe.",
		1299, -1, 0},
	{"sticker-pack", "Sticker pack", "misc",
		"Ten weatherproof vinyl stickers for laptops, bottles and notebooks.",
		299, -1, 0},
}

// demoOldDescription is what the demo's products said before they had
// descriptions of their own: a rerun replaces it (and nothing else).
const demoOldDescription = "Demo product."

// demoStores are pickup stores around central Paris.
var demoStores = []pickup.Store{
	{ID: "paris-louvre", Name: "Shop Louvre", Address: "99 Rue de Rivoli, Paris", Lng: 2.3376, Lat: 48.8606},
	{ID: "paris-bastille", Name: "Shop Bastille", Address: "Place de la Bastille, Paris", Lng: 2.3695, Lat: 48.8532},
	{ID: "paris-defense", Name: "Shop La Défense", Address: "Parvis de la Défense, Puteaux", Lng: 2.2380, Lat: 48.8920},
}

// demoSales are what each demo shopper buys (sku → units), so the
// best-seller boards have something to show.
var demoSales = []map[string]int{
	{"tee-black": 3, "earbuds-pro": 1},
	{"tee-black": 2, "hoodie-grey": 1},
	{"earbuds-pro": 2, "hoodie-grey": 1, "phone-x1": 1},
}

func newSeedCmd(a *app) *cobra.Command {
	// The demo's shoppers are users (their password hashing) who place
	// orders (the saga's hold, on a cluster).
	var reset bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Create a demo admin and a small catalog on sale (idempotent; SHOP_ENV=dev only)",
		Long: "Create the demo admin (" + demoAdminEmail + ") and a small catalog in a few categories, " +
			"and open sale rounds for some products. Running it again changes nothing: existing users, " +
			"products and sale rounds are left as they are.\n\n" +
			"--reset first clears the demo's data and nothing else: the demo products, their sale rounds " +
			"and every order with a line of them, the demo shoppers (shopper1..3@demo.shop) and their " +
			"orders; the demo admin and its sessions are kept. Then it seeds afresh.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.seedDemo(cmd.Context(), reset) },
	}
	cmd.Flags().BoolVar(&reset, "reset", false, "clear the demo's data (only the demo's) before seeding it again")
	return parentCmd("seed", "Load data", readsSettings(cmd, migratedSettings, []string{"SHOP_PASSWORD_HASHING", "SHOP_SAGA_HOLD_TTL"}))
}

func (a *app) seedDemo(ctx context.Context, reset bool) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	if !cfg.Dev() {
		return errors.New("seed demo: refusing outside development (set SHOP_ENV=dev): the demo admin's password is public")
	}
	log := a.logger(cfg)
	st, err := openMigrated(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	svc := auth.New(st.db, st.redis, shop.AuthConfig(cfg), log, nil)
	catalog := shop.NewCatalog(st.shop(), cfg, log, nil)
	stock := shop.NewStock(st.shop(), cfg)
	reg := newRegistry()
	boards := bestseller.New(st.redis, st.db, catalog, lock.New(st.redis, cfg.KeyPrefix), cfg.KeyPrefix, log, reg)
	if reset {
		if err := resetDemo(ctx, st, cfg, log, svc, boards); err != nil {
			return err
		}
	}
	if _, err := svc.CreateUser(ctx, demoAdminEmail, demoAdminPassword, "Demo admin", auth.RoleAdmin); err != nil &&
		!errors.Is(err, auth.ErrEmailTaken) {
		return fmt.Errorf("seed demo: admin: %w", err)
	}
	sales := inventory.NewSales(st.db, stock)
	for _, p := range demoCatalog {
		if err := seedProduct(ctx, catalog, sales, p); err != nil {
			return fmt.Errorf("seed demo: %s: %w", p.sku, err)
		}
	}
	if err := seedStores(ctx, pickup.New(st.db, st.redis, lock.New(st.redis, cfg.KeyPrefix), cfg.KeyPrefix, log)); err != nil {
		return err
	}
	orders := order.New(st.db, st.redis, stock, catalog.Exists, cfg.KeyPrefix, log, reg, order.Options{Placer: shop.Placer(cfg)})
	if err := seedSales(ctx, svc, orders, boards); err != nil {
		return err
	}
	return printDemo(ctx, a.stdout, sales)
}

// seedStores writes the demo stores (a replace, so a rerun changes nothing).
func seedStores(ctx context.Context, stores *pickup.Service) error {
	for _, s := range demoStores {
		if _, err := stores.Put(ctx, s); err != nil {
			return fmt.Errorf("seed demo: store %s: %w", s.ID, err)
		}
	}
	return nil
}

// demoShopper is the email of the demo shopper who buys demoSales[i].
func demoShopper(i int) string { return fmt.Sprintf("shopper%d@demo.shop", i+1) }

// seedSales has new demo shoppers buy demoSales through the real purchase
// path (the order writer of `shop serve` persists them), and counts them on
// the best-seller boards at once, which the writer's after-commit hook
// would do: each order counts once, whoever records it first. Shoppers
// that exist already bought on an earlier run, so a rerun buys nothing.
func seedSales(ctx context.Context, users *auth.Service, orders *order.Service, boards *bestseller.Service) error {
	for i, basket := range demoSales {
		u, err := users.CreateUser(ctx, demoShopper(i), demoAdminPassword, "", auth.RoleShopper)
		if errors.Is(err, auth.ErrEmailTaken) {
			continue
		}
		if err != nil {
			return fmt.Errorf("seed demo: shopper: %w", err)
		}
		for sku, units := range basket {
			p, err := orders.Place(ctx, u.ID, []order.Line{{SKU: sku, Quantity: units}}, order.PlaceOptions{})
			if err != nil {
				return fmt.Errorf("seed demo: buy %s: %w", sku, err)
			}
			o := bestseller.Order{ID: p.OrderID, At: time.Now(), Lines: []bestseller.Line{{SKU: sku, Units: int64(units)}}}
			if _, err := boards.Record(ctx, []bestseller.Order{o}); err != nil {
				return fmt.Errorf("seed demo: best sellers: %w", err)
			}
		}
	}
	return nil
}

// seedProduct creates p if it is missing and opens its sale if it never had
// one, so a second run neither duplicates nor restocks anything.
func seedProduct(ctx context.Context, catalog *inventory.Catalog, sales *inventory.Sales, p demoProduct) error {
	in := inventory.ProductInput{Name: p.name, Description: p.description, Category: p.category, PriceCents: p.price}
	_, err := catalog.Create(ctx, p.sku, in)
	if err != nil && !errors.Is(err, inventory.ErrSKUTaken) {
		return err
	}
	if err := seedDescription(ctx, catalog, p.sku, in); err != nil {
		return err
	}
	if err := seedImage(ctx, catalog, p.sku); err != nil {
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

// seedDescription gives a product of an earlier demo its description
// in place of demoOldDescription; an admin's edit stays.
func seedDescription(ctx context.Context, catalog *inventory.Catalog, sku string, in inventory.ProductInput) error {
	p, err := catalog.Get(ctx, sku)
	if err != nil || p.Description != demoOldDescription {
		return err
	}
	_, err = catalog.Update(ctx, sku, inventory.ProductInput{
		Name: p.Name, Description: in.Description, Category: p.Category, PriceCents: p.PriceCents,
	})
	return err
}

// seedImage gives the product its drawn picture unless it has one (an
// admin's upload stays).
func seedImage(ctx context.Context, catalog *inventory.Catalog, sku string) error {
	p, err := catalog.Get(ctx, sku)
	if err != nil || p.ImageURL != "" {
		return err
	}
	_, err = catalog.SetImage(ctx, sku, "image/png", demoImage(sku))
	return err
}

// printDemo says what the demo holds, its flash sale's units read from
// the store: a rerun after an admin opened another round tells that
// round's, not the seed's.
func printDemo(ctx context.Context, w io.Writer, sales *inventory.Sales) error {
	rep, err := sales.Report(ctx, demoFlashSale)
	if err != nil {
		return fmt.Errorf("seed demo: %s: %w", demoFlashSale, err)
	}
	_, err = fmt.Fprintf(w, "demo data ready: admin %s / %s (console: /admin); %d products (%s: %d of %d units available, %d per shopper); %d pickup stores; %d shoppers' sales\n",
		demoAdminEmail, demoAdminPassword, len(demoCatalog), demoFlashSale, rep.Available, rep.Quantity, rep.PerUserLimit,
		len(demoStores), len(demoSales))
	return err
}
