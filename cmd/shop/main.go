// Command shop is the flash-sale backend: one binary that serves the HTTP
// API, runs the order writer and applies migrations. See
// docs/configuration.md for the commands and their configuration.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		// One line: drivers (pgx) put several attempts on separate lines.
		fmt.Fprintln(os.Stderr, "shop: "+strings.Join(strings.Fields(err.Error()), " "))
		os.Exit(1)
	}
}

// run executes the command line args. It reads the environment only through
// getenv and writes only to stdout and stderr, so tests can drive it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	root, a := newRootCmd(getenv, stdout, stderr)
	defer a.closeLog()
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
