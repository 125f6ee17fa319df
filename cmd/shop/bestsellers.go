package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/bestseller"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/shop"
)

func newBestsellersCmd(a *app) *cobra.Command {
	return parentCmd("bestsellers", "Maintain the best-seller boards", readsSettings(&cobra.Command{
		Use:   "rebuild",
		Short: "Recompute today's, this week's, this month's and the all-time boards from PostgreSQL",
		Long: "The boards in Redis are derived from the orders in PostgreSQL; rebuild recomputes them " +
			"(for instance after Redis lost them). It may run while orders are written: a rebuild that " +
			"races them starts over, and it fails if they keep coming. One instance rebuilds at a time.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.onStores(cmd.Context(), true, func(cfg *config.Config, log *slog.Logger, st *stores) error {
				locker := lock.New(st.redis, cfg.KeyPrefix)
				svc := bestseller.New(st.redis, st.db, shop.NewCatalog(st.shop(), cfg, log, nil), locker, cfg.KeyPrefix, log, newRegistry())
				if err := svc.Rebuild(cmd.Context()); err != nil {
					return fmt.Errorf("bestsellers rebuild: %w", err)
				}
				_, err := fmt.Fprintln(a.stdout, "best-seller boards rebuilt from PostgreSQL")
				return err
			})
		},
	}, migratedSettings))
}
