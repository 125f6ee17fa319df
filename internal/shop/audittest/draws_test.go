package audittest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/draw"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// drawn is a drawn round of "d": 5 units, four shoppers asking 2 each, so
// two win whole, one wins 1 of its 2 and one loses; and a fifth shopper
// who withdrew. Every won order is written.
type drawn struct {
	*shoptest.App
	round int64
}

func newDrawn(t *testing.T) *drawn {
	t.Helper()
	d := &drawn{App: shoptest.New(t, shoptest.Options{})}
	d.Product(t, "d", 100)
	d.round = d.Round(t, "d", inventory.Seed{Quantity: 5, PerUserLimit: 2,
		Draw: &inventory.DrawSettings{ClosesAt: time.Now().Add(time.Hour)}})
	ctx := context.Background()
	for i := range 5 {
		u, _ := d.Shopper(t, fmt.Sprintf("entrant%d@example.com", i))
		if _, err := d.Draws.Enter(ctx, u, "d", draw.Enter{Quantity: 2, Token: "tok_visa"}); err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			if _, err := d.Draws.Withdraw(ctx, u, "d"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Draws.Run(ctx, d.round); err != nil {
		t.Fatal(err)
	}
	d.Drain(t)
	return d
}

func (d *drawn) exec(t *testing.T, sql string) {
	t.Helper()
	if _, err := d.DB.Pool.Exec(context.Background(), sql, d.round); err != nil {
		t.Fatal(err)
	}
}

// Each broken state of a draw is named by its kind, with its entry; a
// clean draw reports nothing.
func TestAuditNamesEachDrawViolation(t *testing.T) {
	t.Parallel()
	// One entry of the state, picked in SQL ($1 is the round).
	one := func(where string) string {
		return `(SELECT id FROM draw_entries WHERE round_id = $1 AND ` + where + ` ORDER BY rank LIMIT 1)`
	}
	tests := []struct {
		name, sql string
		kinds     []string
		entry     bool   // the problem names the entry
		alter     string // run first: lifts a constraint the state breaks
	}{
		{"won_units_not_sold", `UPDATE draw_entries SET won_units = 1 WHERE id = ` + one(`state = 'won' AND won_units = 2`),
			[]string{"draw_sold"}, false, ""},
		{"entry_won_more_than_asked", `UPDATE draw_entries SET won_units = 3 WHERE id = ` + one(`state = 'won' AND won_units = 2`),
			[]string{"draw_overwon", "draw_sold"}, true, `ALTER TABLE draw_entries DROP CONSTRAINT draw_entries_check`},
		{"round_won_more_than_its_quantity", `UPDATE sale_rounds SET quantity = 4 WHERE id = $1`,
			[]string{"draw_overwon", "quantity"}, false, `ALTER TABLE sale_rounds DROP CONSTRAINT sale_rounds_sold_check`},
		{"captured_and_cancelled", `UPDATE draw_entries SET cancelled_at = now() WHERE id = ` + one(`state = 'won'`),
			[]string{"draw_captured_cancelled"}, true, ""},
		{"loser_not_cancelled", `UPDATE draw_entries SET cancelled_at = NULL WHERE id = ` + one(`state = 'lost'`),
			[]string{"draw_not_cancelled"}, true, ""},
		{"withdrawn_not_cancelled", `UPDATE draw_entries SET cancelled_at = NULL WHERE id = ` + one(`state = 'withdrawn'`),
			[]string{"draw_not_cancelled"}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDrawn(t)
			s := &sale{App: d.App}
			if rep := s.audit(t); !rep.OK {
				t.Fatalf("audit of a clean draw: %+v", rep.Problems)
			}
			if tc.alter != "" {
				if _, err := d.DB.Pool.Exec(context.Background(), tc.alter); err != nil {
					t.Fatal(err)
				}
			}
			d.exec(t, tc.sql)
			rep := s.audit(t)
			var kinds []string
			named := !tc.entry
			for _, p := range rep.Problems {
				if !slices.Contains(kinds, p.Kind) {
					kinds = append(kinds, p.Kind)
				}
				named = named || (len(p.EntryIDs) == 1 && p.RoundID == d.round)
			}
			slices.Sort(kinds)
			if rep.OK || !slices.Equal(kinds, tc.kinds) || !named {
				t.Fatalf("problems %+v: kinds %v, want %v (entry named: %v)", rep.Problems, kinds, tc.kinds, tc.entry)
			}
		})
	}
}

// A won order the writer has not persisted yet is no draw_sold problem
// within the lag bound, and is one past it.
func TestAuditWaitsTheLagBoundForAWonOrder(t *testing.T) {
	t.Parallel()
	d := newDrawn(t)
	d.exec(t, `DELETE FROM orders WHERE id IN (SELECT order_id FROM draw_entries WHERE round_id = $1 AND state = 'won'
		ORDER BY rank LIMIT 1)`)
	a := audit.New(d.DB.Pool, d.Redis.Client, d.Stock, d.Config.KeyPrefix, d.Log)
	rep, err := a.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if p.Kind == "draw_sold" {
			t.Fatalf("draw_sold within the lag bound: %+v", p)
		}
	}
	d.exec(t, `UPDATE draw_entries SET updated_at = now() - interval '1 hour' WHERE round_id = $1`)
	if rep, err = a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Problems, func(p audit.Problem) bool { return p.Kind == "draw_sold" }) {
		t.Fatalf("problems %+v, want draw_sold past the lag bound", rep.Problems)
	}
}
