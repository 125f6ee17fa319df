package inventory_test

import (
	"context"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/testenv"
)

// A draw round is recorded with its settings and a committed seed, its
// sale hash is marked, and the stock report echoes the draw; a new
// round without one replaces it whole.
func TestDrawRoundSeeding(t *testing.T) {
	t.Parallel()
	s := newServices(t)
	ctx := context.Background()
	closes := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	rep := s.openDraw(t, "drop-1", closes)
	d := rep.Draw
	if d == nil || !d.ClosesAt.Equal(closes) || d.State != inventory.DrawOpen || d.Entries != 0 || d.Winners != 0 ||
		len(d.SeedSHA256) != 64 {
		t.Fatalf("seeded draw %+v", d)
	}
	got, err := s.Sales.Report(ctx, "drop-1")
	if err != nil || got.Draw == nil || *got.Draw != *d {
		t.Fatalf("report draw %+v (%v), want %+v", got.Draw, err, d)
	}
	var seed string
	if err := s.db.Pool.QueryRow(ctx, `SELECT draw_seed FROM sale_rounds WHERE id = $1`, *rep.RoundID).Scan(&seed); err != nil ||
		len(seed) != 64 || inventory.SeedSHA(seed) != d.SeedSHA256 {
		t.Fatalf("seed %q (%v) does not hash to %s", seed, err, d.SeedSHA256)
	}
	if live, ok, err := s.stock.Live(ctx, "drop-1"); err != nil || !ok || !live.Draw {
		t.Fatalf("live %+v %v %v, want a draw", live, ok, err)
	}
	if c, err := s.stock.Current(ctx, "drop-1"); err != nil || !c.Draw || !c.DrawKnown {
		t.Fatalf("current %+v (%v), want a draw", c, err) // what a live stream shows first
	}
	if _, err := s.Sales.Open(ctx, "drop-1", inventory.Seed{Quantity: 3}); err != nil {
		t.Fatal(err)
	}
	if live, _, _ := s.stock.Live(ctx, "drop-1"); live.Draw {
		t.Fatal("a round without a draw kept the draw's mark")
	}
	if c, err := s.stock.Current(ctx, "drop-1"); err != nil || c.Draw || !c.DrawKnown {
		t.Fatalf("current %+v (%v), want no draw", c, err)
	}
	if got, _ := s.Sales.Report(ctx, "drop-1"); got.Draw != nil {
		t.Fatalf("a round without a draw reports %+v", got.Draw)
	}
}

// A restored round keeps its draw's mark: without it, a Redis rebuilt
// from PostgreSQL would sell the draw's units first come, first served.
func TestRestoreKeepsTheDrawMark(t *testing.T) {
	t.Parallel()
	s := newServices(t)
	r := testenv.NewRedis(t) // the services' stock, on a Redis this test can reach
	s.stock = inventory.NewStock(r.Client, r.Prefix)
	s.Sales = inventory.NewSales(s.db.Pool, s.stock)
	ctx := context.Background()
	s.openDraw(t, "drop-2", time.Now().Add(time.Hour))
	live, _, err := s.stock.Live(ctx, "drop-2")
	if err != nil {
		t.Fatal(err)
	}
	r.Client.HDel(ctx, s.stock.SaleKey("drop-2"), "draw") // as a lost Redis would
	fence, err := s.stock.ReadFence(ctx, "drop-2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.stock.Restore(ctx, "drop-2", fence, inventory.Restored{LiveRound: live, Buyers: map[string]int64{}}); err != nil {
		t.Fatal(err)
	}
	if after, _, err := s.stock.Live(ctx, "drop-2"); err != nil || !after.Draw {
		t.Fatalf("restored %+v (%v), want the draw's mark", after, err)
	}
}

// openDraw creates sku and opens a draw round of 3 units on it, 2 a
// shopper, closing at closes.
func (s *services) openDraw(t *testing.T, sku string, closes time.Time) inventory.StockReport {
	t.Helper()
	s.create(t, sku, "c", 500)
	rep, err := s.Sales.Open(context.Background(), sku, inventory.Seed{Quantity: 3, PerUserLimit: 2,
		Draw: &inventory.DrawSettings{ClosesAt: closes}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
