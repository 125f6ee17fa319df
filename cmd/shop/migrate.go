package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/database"
)

func newMigrateCmd(a *app) *cobra.Command {
	var createDB bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit",
		Long:  "Apply every pending migration (idempotent). Several instances may run it at once: a PostgreSQL advisory lock serialises them.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.onDatabase(cmd.Context(), createDB, func(_ *config.Config, _ *pgxpool.Pool, applied int) error {
				_, err := fmt.Fprintf(a.stdout, "migrations applied: %d\n", applied)
				return err
			})
		},
	}
	readsSettings(cmd, []string{"SHOP_DATABASE_URL"})
	cmd.Flags().BoolVar(&createDB, "create-db", false, "create the database first if it does not exist (development)")
	return cmd
}

// onDatabase runs fn with the configuration and PostgreSQL open and
// migrated (applied: the migrations this run applied), without Redis:
// what `shop migrate` and `shop user add` need. createDB creates the
// database first when it is missing.
func (a *app) onDatabase(ctx context.Context, createDB bool, fn func(cfg *config.Config, db *pgxpool.Pool, applied int) error) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	if createDB {
		if err := database.CreateIfMissing(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
	}
	db, err := database.OpenPostgres(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := database.Migrate(ctx, db)
	if err != nil {
		return err
	}
	return fn(cfg, db, n)
}
