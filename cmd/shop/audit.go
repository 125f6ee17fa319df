package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/inventory"
)

func newAuditCmd(a *app) *cobra.Command {
	var lagBound time.Duration
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check stock, orders and the order stream against each other; exit 1 on a violation",
		Long: "For every live round: quantity == available + the units of its pending, confirmed and paid " +
			"orders, from Redis and from PostgreSQL independently; every order accepted longer ago than " +
			"--lag-bound is in PostgreSQL; every pending stream entry exists; no dead letters. Prints the " +
			"report as JSON.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			log := a.logger(cfg)
			ctx := cmd.Context()
			st, err := openStores(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer st.Close()
			aud := audit.New(st.db, st.redis, inventory.NewStock(st.redis, cfg.KeyPrefix), cfg.KeyPrefix, log)
			aud.LagBound = lagBound
			rep, err := aud.Run(ctx)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(a.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
			if !rep.OK {
				return fmt.Errorf("audit: %d problems, the first: %s", len(rep.Problems), rep.Problems[0].Detail)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&lagBound, "lag-bound", audit.DefaultLagBound, "an order accepted this long ago must be in PostgreSQL")
	return cmd
}
