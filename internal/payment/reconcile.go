package payment

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/shop-oss/shop/internal/order"
)

// Reconcile repairs what lost webhooks left behind (`shop payments
// reconcile`): first the recorded events never applied, then, from
// Stripe's own list of the intents created since since, every succeeded
// intent whose order was not paid with it: the webhook's effect, a refund
// included; and every intent of a draw entry (metadata draw_entry_id, a
// manual capture) is given to the draws as its webhook would have been
// (w's entries): an authorisation the entry missed, a hold nobody needs
// released, a contradiction reported. It writes one line per repair to out and returns an error
// when something could not be repaired.
func Reconcile(ctx context.Context, p *Stripe, w *Webhook, orders Orders, since time.Time, out io.Writer) error {
	failed := 0
	// Events received in the last minute may be being applied right now:
	// their delivery answers for them.
	applied, err := w.ApplyPending(ctx, time.Now().Add(-time.Minute))
	if applied > 0 {
		fmt.Fprintf(out, "applied %d recorded webhook event(s) that had not been\n", applied)
	}
	if err != nil {
		fmt.Fprintf(out, "could not apply a recorded webhook event: %v\n", err)
		failed++
	}
	err = p.Intents(ctx, since, func(in Intent) error {
		if in.EntryID != "" {
			failed += reconcileEntry(ctx, w, in, out)
			return nil
		}
		if in.Status != order.PaymentSucceeded || in.OrderID == "" {
			return nil
		}
		outcome, err := orders.PaymentSucceeded(ctx, in.OrderID, in.Payment())
		switch {
		case err != nil:
			fmt.Fprintf(out, "%s order %s: could not repair: %v\n", in.ID, in.OrderID, err)
			failed++
		case outcome == order.SettledPaid:
			fmt.Fprintf(out, "%s order %s: succeeded, the order was not paid: paid now\n", in.ID, in.OrderID)
		case outcome == order.SettledRefunded:
			fmt.Fprintf(out, "%s order %s: succeeded, the order could not be paid any more: refunded\n", in.ID, in.OrderID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list payment intents: %w", err)
	}
	if failed > 0 {
		return fmt.Errorf("%d payment(s) could not be repaired", failed)
	}
	return nil
}

// reconcileEntry gives a draw entry's intent to the draws; it returns 1
// when that failed.
func reconcileEntry(ctx context.Context, w *Webhook, in Intent, out io.Writer) int {
	if w.entries == nil {
		return 0
	}
	did, err := w.entries.HoldSeen(ctx, in.EntryID, in.Payment())
	switch {
	case err != nil:
		fmt.Fprintf(out, "%s entry %s: could not repair: %v\n", in.ID, in.EntryID, err)
		return 1
	case did != "":
		fmt.Fprintf(out, "%s entry %s: %s: %s\n", in.ID, in.EntryID, in.Status, did)
	}
	return 0
}
