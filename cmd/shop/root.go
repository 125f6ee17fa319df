package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shop-oss/shop/internal/config"
)

// app carries what every command needs: where to write, and how to read
// the configuration once the flags are parsed.
type app struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	flags  *pflag.FlagSet
}

func newRootCmd(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	a := &app{getenv: getenv, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "shop",
		Short:         "Flash-sale e-commerce backend",
		Long:          "shop serves a storefront API built for flash sales: atomic Redis reservations, an order stream persisted to PostgreSQL exactly once.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	a.flags = root.PersistentFlags()
	// Each flag shows its variable's default; the value in force is the
	// flag's when given, else the variable's, else that default.
	defaults := config.Defaults()
	for _, name := range config.Variables() {
		a.flags.String(flagName(name), defaults[name], "overrides $"+name)
	}
	root.AddCommand(
		newServeCmd(a),
		newWriterCmd(a),
		newSeedCmd(a),
		newBestsellersCmd(a),
		newMigrateCmd(a),
		newUserCmd(a),
		newLoadtestCmd(a),
		newAuditCmd(a),
		newVersionCmd(a),
		newRoutesCmd(a),
	)
	return root
}

// flagName turns SHOP_REDIS_URL into redis-url.
func flagName(variable string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(variable, "SHOP_")), "_", "-")
}

// config reads the environment, lets flags of the same name override it,
// and validates the result.
func (a *app) config() (*config.Config, error) {
	environ := map[string]string{}
	for _, name := range config.Variables() {
		if v, ok := a.lookup(name); ok {
			environ[name] = v
		}
	}
	return config.Load(environ)
}

func (a *app) lookup(name string) (string, bool) {
	if f := a.flags.Lookup(flagName(name)); f != nil && f.Changed {
		return f.Value.String(), true
	}
	if a.getenv == nil {
		return "", false
	}
	// An empty variable is treated as unset: the default applies.
	if v := a.getenv(name); v != "" {
		return v, true
	}
	return "", false
}

// logger writes structured logs to stdout (stderr stays for the one line a
// failing command prints): JSON in production, text in development.
func (a *app) logger(cfg *config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.Dev() {
		return slog.New(slog.NewTextHandler(a.stdout, opts))
	}
	return slog.New(slog.NewJSONHandler(a.stdout, opts))
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(a.stdout, "shop %s\n", version)
			return err
		},
	}
}
