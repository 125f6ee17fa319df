package loadtest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// sale builds the evidence of a clean sale: shoppers bought perShopper
// units each out of seeded, the writer confirmed all of it.
func sale(seeded, limit int, perShopper ...int) evidence {
	tl := newTally(len(perShopper), limit, 0)
	sold := 0
	for s, n := range perShopper {
		for range n {
			tl.add(s, 202, accepted(uuid.NewString()))
			sold++
		}
	}
	return evidence{
		seeded: seeded, limit: limit, tally: tl, drained: true, drainTimeout: time.Minute,
		stock: stock{Quantity: int64(seeded), Available: int64(seeded - sold), Sold: int64(sold), Confirmed: int64(sold)},
	}
}

func TestInvariants(t *testing.T) {
	tests := []struct {
		name   string
		change func(e *evidence)
		failed []string // the invariants that fail, by part of their name
	}{
		{"clean", func(*evidence) {}, nil},
		{"oversold", func(e *evidence) { e.stock.Available = -1; e.stock.Sold = e.stock.Quantity + 1 },
			[]string{"no oversell", "accepted == sold", "confirmed once"}},
		{"wrong_quantity", func(e *evidence) { e.stock.Quantity++ }, []string{"no oversell"}},
		{"sold_unseen", func(e *evidence) {
			e.stock.Available--
			e.stock.Sold++
			e.stock.Confirmed++
		}, []string{"accepted == sold"}},
		{"sold_unseen_explained_by_no_answer", func(e *evidence) {
			e.stock.Available--
			e.stock.Sold++
			e.stock.Confirmed++
			e.tally.add(0, 0, nil)
		}, nil},
		{"accepted_more_than_sold", func(e *evidence) {
			e.stock.Available++
			e.stock.Sold--
			e.stock.Confirmed--
			e.tally.add(0, 503, problemBody("unavailable"))
		}, []string{"accepted == sold"}},
		{"over_limit", func(e *evidence) { e.limit = 1 }, []string{"never more per shopper"}},
		{"unattributed", func(e *evidence) {
			e.tally.add(-1, 202, accepted(uuid.NewString()))
			e.stock.Available--
			e.stock.Sold++
			e.stock.Confirmed++
		}, []string{"never more per shopper"}},
		{"duplicate_order_id", func(e *evidence) {
			id := uuid.NewString()
			e.tally = newTally(2, 2, 0)
			e.tally.add(0, 202, accepted(id))
			e.tally.add(1, 202, accepted(id))
			e.tally.add(1, 202, accepted(uuid.NewString()))
		}, []string{"own order id"}},
		{"not_drained", func(e *evidence) { e.drained = false; e.stock.Confirmed-- }, []string{"confirmed once"}},
		{"counted_twice", func(e *evidence) { e.stock.Confirmed++ }, []string{"confirmed once"}},
		{"sample_pending", func(e *evidence) {
			e.sampleChecked = 2
			e.sampleBad = []string{"order x: status pending"}
		}, []string{"sampled orders"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := sale(10, 2, 2, 1)
			tc.change(&e)
			invs := checkInvariants(e)
			if len(invs) != 6 {
				t.Fatalf("%d invariants reported, want all 6", len(invs))
			}
			bad := failed(invs)
			if len(bad) != len(tc.failed) {
				t.Fatalf("failed: %+v, want %q", bad, tc.failed)
			}
			for i, want := range tc.failed {
				if !strings.Contains(bad[i].Name, want) {
					t.Errorf("failed #%d is %q, want %q", i, bad[i].Name, want)
				}
			}
		})
	}
}

func TestInvariantDetails(t *testing.T) {
	e := sale(10, 1, 2, 1)
	e.drained = false
	inv := perUserLimit(e)
	if inv.OK || !strings.Contains(inv.Detail, "limit 1; most by one shopper 2 (shopper #0)") {
		t.Errorf("per-user detail = %+v", inv)
	}
	if inv := confirmedOnce(e); inv.OK || !strings.Contains(inv.Detail, "did not drain within 1m0s") {
		t.Errorf("drain detail = %+v", inv)
	}
	unlimited := sale(10, 0, 3)
	if inv := perUserLimit(unlimited); !inv.OK || !strings.Contains(inv.Detail, "no limit; most by one shopper 3") {
		t.Errorf("unlimited detail = %+v", inv)
	}
}
