package main

import (
	"fmt"

	"github.com/spf13/cobra"

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
			cfg, err := a.config()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
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
			_, err = fmt.Fprintf(a.stdout, "migrations applied: %d\n", n)
			return err
		},
	}
	cmd.Flags().BoolVar(&createDB, "create-db", false, "create the database first if it does not exist (development)")
	return cmd
}
