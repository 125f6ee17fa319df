package loadtest

import (
	"bufio"
	"fmt"
	"os"
	"slices"
)

// writeAccepted writes the id of every order a shopper was answered 202
// for, one a line, sorted: the driver's log `shop recover --accepted`
// reads after a failover to name the accepted orders neither store kept.
// Written right after the attack, before the writer is waited for, so the
// list exists even when the stores cannot be read afterwards.
func writeAccepted(path string, t *tally) error {
	ids := make([]string, 0, len(t.orders))
	for id := range t.orders {
		ids = append(ids, id.String())
	}
	slices.Sort(ids)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--accepted-out: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "# %d order ids answered 202 accepted\n", len(ids))
	for _, id := range ids {
		fmt.Fprintln(w, id)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("--accepted-out: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--accepted-out: %w", err)
	}
	return nil
}
