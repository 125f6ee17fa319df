package writer

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/testenv"
)

// A refund replaces the payment it undoes, whichever the writer records
// first and whether or not one batch holds both; any other final state
// stands once recorded, a delivery again included. The payment's time
// stays the row's at (paid_at), the refund's is refunded_at.
func TestRefundIsRecordedOverThePayment(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	paidAt, refundedAt := time.UnixMilli(1_700_000_000_000).UTC(), time.UnixMilli(1_700_000_060_000).UTC()
	paid := func(id string) Transition {
		return Transition{OrderID: id, Status: order.StatusPaid, At: paidAt, PaymentRef: "ch_1", streamID: "1-0"}
	}
	refunded := func(id string) Transition {
		return Transition{OrderID: id, Status: order.StatusRefunded, At: refundedAt, PaymentRef: "ch_1", streamID: "2-0"}
	}
	cancelled := func(id string) Transition {
		return Transition{OrderID: id, Status: order.StatusCancelled, At: refundedAt, streamID: "2-0"}
	}
	for name, batches := range map[string]func(id string) [][]Transition{
		"paid_then_refunded": func(id string) [][]Transition { return [][]Transition{{paid(id)}, {refunded(id)}} },
		"refunded_then_paid": func(id string) [][]Transition { return [][]Transition{{refunded(id)}, {paid(id)}} },
		"one_batch":          func(id string) [][]Transition { return [][]Transition{{paid(id), refunded(id), paid(id)}} },
		"one_batch_reversed": func(id string) [][]Transition { return [][]Transition{{refunded(id), paid(id)}} },
		"delivered_again": func(id string) [][]Transition {
			return [][]Transition{{paid(id), refunded(id)}, {refunded(id), paid(id)}}
		},
	} {
		id := uuid.NewString()
		for _, b := range batches(id) {
			if err := recordTransitions(context.Background(), db.Pool, b); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		var status, ref, stream string
		var at, back time.Time
		err := db.Pool.QueryRow(context.Background(), `SELECT status, at, refunded_at, payment_ref, stream_id
FROM order_transitions WHERE order_id = $1`, id).Scan(&status, &at, &back, &ref, &stream)
		if err != nil || status != order.StatusRefunded || !at.Equal(paidAt) || !back.Equal(refundedAt) || ref != "ch_1" || stream != "2-0" {
			t.Errorf("%s: %s at %v refunded %v ref %q stream %q (%v), want refunded at the payment's time, the refund's after",
				name, status, at, back, ref, stream, err)
		}
	}
	id := uuid.NewString() // a cancel stands: no refund of an unpaid order
	for _, b := range [][]Transition{{cancelled(id), refunded(id)}, {refunded(id)}} {
		if err := recordTransitions(context.Background(), db.Pool, b); err != nil {
			t.Fatal(err)
		}
	}
	var status string
	if err := db.Pool.QueryRow(context.Background(), `SELECT status FROM order_transitions WHERE order_id = $1`, id).Scan(&status); err != nil || status != order.StatusCancelled {
		t.Fatalf("cancelled, then refunded: %q %v, want cancelled", status, err)
	}
}
