package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/recovery"
	"github.com/shop-oss/shop/internal/shop"
)

func newRecoverCmd(a *app) *cobra.Command {
	var acceptedFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "recover [--accepted FILE]",
		Short: "Rebuild the live stock after Redis lost writes; report accepted orders neither store holds (exit 1)",
		Long: "After a Redis failover (or any loss of Redis writes), rebuild each live round's available units, " +
			"per-buyer counts and released orders from PostgreSQL plus what the order stream and the dead letters " +
			"still hold: every known order that is not cancelled or expired keeps its units, so none is sold twice. " +
			"Each SKU is rewritten in one script, only if its stock did not move while it was read, so it is safe " +
			"while serve and the writers run (a SKU that keeps moving is retried, then recover asks for a pause); " +
			"a second run changes nothing.\n\n" +
			"--accepted FILE lists the order ids clients were answered 202 for, one a line (`shop loadtest " +
			"--accepted-out` writes one; - reads stdin): each that PostgreSQL does not have and no stream event " +
			"names is printed as `lost <order id>`, and recover exits 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			accepted, err := readAccepted(acceptedFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return a.onStores(cmd.Context(), false, func(cfg *config.Config, log *slog.Logger, st *stores) error {
				return a.runRecover(cmd.Context(), cfg, log, st, accepted, acceptedFile != "", asJSON)
			})
		},
	}
	cmd.Flags().StringVar(&acceptedFile, "accepted", "", "file of accepted order ids, one a line (- for stdin)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	return readsSettings(cmd, storeSettings)
}

func readAccepted(path string, stdin io.Reader) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("recover: --accepted: %w", err)
	}
	ids, err := recovery.ParseAccepted(string(b))
	if err != nil {
		return nil, fmt.Errorf("recover: --accepted %s: %w", path, err)
	}
	return ids, nil
}

// runRecover rebuilds and prints what it did; lost orders are an error
// (exit 1) after their lines.
func (a *app) runRecover(ctx context.Context, cfg *config.Config, log *slog.Logger, st *stores, accepted []string, checked, asJSON bool) error {
	r := recovery.New(st.db, st.redis, shop.NewStock(st.shop(), cfg), cfg.KeyPrefix, log)
	rep, err := r.Run(ctx, accepted)
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(a.stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		printRecovery(a.stdout, rep, checked)
	}
	if len(rep.Lost) > 0 {
		return fmt.Errorf("recover: %d of %d accepted orders are in neither PostgreSQL nor Redis", len(rep.Lost), rep.Accepted)
	}
	return nil
}

func printRecovery(w io.Writer, rep recovery.Report, checked bool) {
	for _, r := range rep.Rounds {
		state := "unchanged"
		if r.Changed {
			state = "rebuilt (Redis had round available released = " + r.Before + ")"
		}
		fmt.Fprintf(w, "round %d of %s: %d available of %d, %d held by %d buyers, %d released, %d orders: %s\n",
			r.RoundID, r.SKU, r.Available, r.Quantity, r.Held, r.Buyers, r.Released, r.Orders, state)
	}
	if rep.StatusesRestored > 0 {
		fmt.Fprintf(w, "%d confirmed orders had lost their status in Redis: restored (they can be paid, cancelled and expire again)\n",
			rep.StatusesRestored)
	}
	if rep.SettledRestored > 0 {
		fmt.Fprintf(w, "%d settled log entries brought in step with the rebuilt stock\n", rep.SettledRestored)
	}
	if !checked {
		fmt.Fprintln(w, "no --accepted file: lost orders not checked")
		return
	}
	for _, l := range rep.Lost {
		if l.Status != "" {
			fmt.Fprintf(w, "lost %s (its status in Redis still says %s, but no event will write it)\n", l.OrderID, l.Status)
		} else {
			fmt.Fprintf(w, "lost %s\n", l.OrderID)
		}
	}
	fmt.Fprintf(w, "%d accepted orders checked, %d lost\n", rep.Accepted, len(rep.Lost))
}
