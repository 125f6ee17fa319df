package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/shop"
)

// newRoutesCmd lists every route of the app `shop serve` builds, one
// "METHOD /path" a line: the e2e authorization matrix calls each of them,
// so a new route is covered (or flagged) without anyone listing it. It
// connects to the stores as serve does, since the wiring needs them, but
// serves nothing and migrates nothing.
func newRoutesCmd(a *app) *cobra.Command {
	return readsSettings(&cobra.Command{
		Use:    "routes",
		Short:  "List the HTTP routes `shop serve` mounts",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			if _, err := cfg.EnsureJWTSecret(); err != nil {
				return err
			}
			st, err := openStores(cmd.Context(), cfg, a.logger(cfg))
			if err != nil {
				return err
			}
			defer st.Close()
			fapp := shop.New(cfg, st.shop(), a.logger(cfg), newRegistry()).Fiber
			var lines []string
			for _, r := range fapp.GetRoutes(true) {
				if r.Method != "HEAD" { // Fiber adds one to every GET
					lines = append(lines, r.Method+" "+r.Path)
				}
			}
			slices.Sort(lines)
			_, err = fmt.Fprintln(a.stdout, strings.Join(slices.Compact(lines), "\n"))
			return err
		},
	}, allSettings)
}
