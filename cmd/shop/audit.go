package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/room"
	"github.com/shop-oss/shop/internal/shop"
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
			// Read-only: the audit migrates nothing.
			return a.onStores(cmd.Context(), false, func(cfg *config.Config, log *slog.Logger, st *stores) error {
				return a.runAudit(cmd.Context(), cfg, log, st, lagBound)
			})
		},
	}
	cmd.Flags().DurationVar(&lagBound, "lag-bound", audit.DefaultLagBound, "an order accepted this long ago must be in PostgreSQL")
	return readsSettings(cmd, storeSettings)
}

// runAudit runs the checks and prints the report; a violation is an error
// (exit 1) naming the first problem.
func (a *app) runAudit(ctx context.Context, cfg *config.Config, log *slog.Logger, st *stores, lagBound time.Duration) error {
	stock := shop.NewStock(st.shop(), cfg)
	aud := audit.New(st.db, st.redis, stock, cfg.KeyPrefix, log)
	aud.LagBound = lagBound
	aud.Rooms = room.New(st.db, st.redis, stock, cfg.KeyPrefix, log, room.Options{})
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
}
