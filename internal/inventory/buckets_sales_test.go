package inventory_test

import (
	"context"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
)

// A seeding with buckets records them, echoes them, and the report sums
// the buckets' units; one without answers 1, as every round of before.
func TestStockReportEchoesAndSumsBuckets(t *testing.T) {
	t.Parallel()
	s := newServices(t)
	ctx := context.Background()
	s.create(t, "hot", "c", 100)
	rep, err := s.Sales.Open(ctx, "hot", inventory.Seed{Quantity: 10, PerUserLimit: 1, Buckets: 4})
	if err != nil || rep.Buckets != 4 || rep.Available != 10 || rep.Quantity != 10 {
		t.Fatalf("open: %+v %v", rep, err)
	}
	if rep, err = s.Sales.Report(ctx, "hot"); err != nil || rep.Buckets != 4 || rep.Available != 10 || rep.Sold != 0 {
		t.Fatalf("report: %+v %v", rep, err)
	}
	if rep, err = s.Sales.Open(ctx, "hot", inventory.Seed{Quantity: 3}); err != nil || rep.Buckets != 1 || rep.Available != 3 {
		t.Fatalf("reopen with one bucket: %+v %v", rep, err)
	}
	if rep, err = s.Sales.Report(ctx, "hot"); err != nil || rep.Buckets != 1 || rep.Available != 3 {
		t.Fatalf("report: %+v %v", rep, err)
	}
}
