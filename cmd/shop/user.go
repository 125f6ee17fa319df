package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/shop"
)

func newUserCmd(a *app) *cobra.Command {
	return parentCmd("user", "Manage user accounts", newUserAddCmd(a), newUserDeleteCmd(a))
}

// newUserAddCmd is `shop user add`: the way admins are made, since
// registration over HTTP only ever creates shoppers.
func newUserAddCmd(a *app) *cobra.Command {
	var email, password, name, role string
	cmd := &cobra.Command{
		Use:   "add --email E --password P [--name N] [--role admin]",
		Short: "Create a user account and print its id",
		Long: "Create a user account (PostgreSQL only; migrations are applied first) and print its id. " +
			"Exits non-zero with one line when the email exists (in any letter case) or the input is invalid.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.onDatabase(cmd.Context(), false, func(cfg *config.Config, db *pgxpool.Pool, _ int) error {
				// No Redis: creating a user touches PostgreSQL only.
				svc := auth.New(db, nil, shop.AuthConfig(cfg), a.logger(cfg), nil)
				u, err := svc.CreateUser(cmd.Context(), email, password, name, role)
				if err != nil {
					return userAddError(email, err)
				}
				_, err = fmt.Fprintln(a.stdout, u.ID)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&email, "email", "", "the user's email address (required)")
	f.StringVar(&password, "password", "", "the password, 8 characters to 128 bytes (required)")
	f.StringVar(&name, "name", "", "the user's display name")
	f.StringVar(&role, "role", auth.RoleShopper, "shopper or admin")
	// PostgreSQL only, and the password's hashing cost.
	readsSettings(cmd, logSettings, []string{"SHOP_DATABASE_URL", "SHOP_PASSWORD_HASHING"})
	_ = cmd.MarkFlagRequired("email")
	_ = cmd.MarkFlagRequired("password")
	return cmd
}

// userAddError says in one line what the operator has to change, naming
// flags rather than JSON fields.
func userAddError(email string, err error) error {
	var e *apperr.Error
	switch {
	case errors.Is(err, auth.ErrEmailTaken):
		return fmt.Errorf("user add: a user with email %q already exists", strings.TrimSpace(email))
	case errors.As(err, &e) && e.Code == apperr.CodeInvalidRequest:
		msgs := make([]string, len(e.Fields))
		for i, f := range e.Fields {
			msgs[i] = "--" + f.Field + " " + f.Message
		}
		return fmt.Errorf("user add: invalid input: %s", strings.Join(msgs, "; "))
	default:
		return fmt.Errorf("user add: %w", err)
	}
}

// newUserDeleteCmd is `shop user delete`: a GDPR erasure. The account is
// anonymised (its orders stay, for the shop's books) and every session of
// it revoked.
func newUserDeleteCmd(a *app) *cobra.Command {
	var id, email string
	cmd := &cobra.Command{
		Use:   "delete (--id ID | --email E)",
		Short: "Erase a user: anonymise the account and revoke every session",
		Long: "Erase a user (GDPR): the email, name and password are wiped, the row stays anonymised so " +
			"the user's orders keep their history, and every session is revoked at once. Exits non-zero " +
			"with one line when no live user matches.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (id == "") == (email == "") {
				return errors.New("user delete: give exactly one of --id and --email")
			}
			ctx := cmd.Context()
			return a.onStores(ctx, true, func(cfg *config.Config, log *slog.Logger, st *stores) error {
				svc := auth.New(st.db, st.redis, shop.AuthConfig(cfg), log, nil)
				uid := id
				if email != "" {
					var err error
					if uid, err = svc.UserID(ctx, email); err != nil {
						return fmt.Errorf("user delete: %w", err)
					}
				}
				uid, cancelled, err := shop.EraseUser(ctx, svc, shop.NewOrders(st.shop(), cfg, log), uid)
				if err != nil {
					return fmt.Errorf("user delete: %w", err)
				}
				log.Info("user erased", "id", uid, "unpaid_orders_cancelled", cancelled)
				_, err = fmt.Fprintln(a.stdout, uid)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "the user's id")
	f.StringVar(&email, "email", "", "the user's email address")
	// Its sessions, and its unpaid orders cancelled.
	return readsSettings(cmd, migratedSettings, orderSettings)
}
