package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/logbuf"
)

// app carries what every command needs: where to write, and how to read
// the configuration once the flags are parsed.
type app struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	flags  *pflag.FlagSet
	// logOut batches the log lines written to stdout (one per request
	// otherwise); made by the first logger, closed by run.
	logOut *logbuf.Writer
}

func newRootCmd(getenv func(string) string, stdout, stderr io.Writer) (*cobra.Command, *app) {
	a := &app{getenv: getenv, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "shop",
		Short: "Flash-sale e-commerce backend",
		Long: "shop serves a storefront API built for flash sales: atomic Redis reservations, an order stream persisted to PostgreSQL exactly once.\n\n" +
			"Settings come from SHOP_* environment variables; each command's -h lists, as flags of the same name, those it reads.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Each command's flags are the settings it reads (readsSettings);
	// the value in force is the flag's when given, else the variable's,
	// else its default.
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { a.flags = cmd.Flags() }
	root.AddCommand(
		newServeCmd(a),
		newWriterCmd(a),
		newSeedCmd(a),
		newBestsellersCmd(a),
		newMigrateCmd(a),
		newUserCmd(a),
		newLoadtestCmd(a),
		newBenchCmd(a),
		newAuditCmd(a),
		newRecoverCmd(a),
		newVersionCmd(a),
		newRoutesCmd(a),
		newPaymentsCmd(a),
	)
	return root, a
}

// parentCmd is a command that only groups its subcommands. Run bare, or
// with a typo that cobra would answer with help and exit 0, it fails
// naming them.
func parentCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	names := make([]string, len(subs))
	for i, sub := range subs {
		names[i] = sub.Name()
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%s: a subcommand is required: %s", use, strings.Join(names, " or "))
		},
	}
	cmd.AddCommand(subs...)
	return cmd
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
	if f := a.flag(name); f != nil && f.Changed {
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

// flag is the running command's flag of the variable name, if it reads it.
func (a *app) flag(name string) *pflag.Flag {
	if a.flags == nil {
		return nil
	}
	return a.flags.Lookup(flagName(name))
}

// logger writes structured logs to stdout (stderr stays for the one line a
// failing command prints): JSON in production, text in development.
func (a *app) logger(cfg *config.Config) *slog.Logger {
	return slog.New(a.handler(cfg, a.stdout))
}

// serverLogger is logger for `shop serve`, whose lines (one per request)
// go out in batches (logbuf: every 100 ms, a warning or error at once, the
// rest when the command ends): one write per access-log line cost more
// than formatting it. Commands that print to stdout themselves keep
// logger, so that their lines and their output stay in order.
func (a *app) serverLogger(cfg *config.Config) *slog.Logger {
	if a.logOut == nil {
		a.logOut = logbuf.New(a.stdout, 0, 0)
	}
	return slog.New(logbuf.Handler(a.handler(cfg, a.logOut), a.logOut))
}

func (a *app) handler(cfg *config.Config, w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.Dev() {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}

// closeLog writes out the log lines still buffered.
func (a *app) closeLog() {
	if a.logOut != nil {
		_ = a.logOut.Close() // stdout failing has nowhere to report to
	}
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
