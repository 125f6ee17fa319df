package audittest

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/shop-oss/shop/internal/audit"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

const bucketUnits, bucketCount = 12, 4

// soldBucketedRound is a round of 12 units over 4 stock buckets, sold
// out, a third of it cancelled and sold again (moves carried units into
// dry home buckets, and the cancelled units from bucket 0), all written.
func soldBucketedRound(t *testing.T) *shoptest.App {
	t.Helper()
	a := shoptest.New(t, shoptest.Options{})
	a.Product(t, "flash", 500)
	a.Round(t, "flash", inventory.Seed{Quantity: bucketUnits, PerUserLimit: 2, Buckets: bucketCount})
	stop := runWriter(t, a)
	defer stop()
	tokens := shoppers(t, a, 3*bucketUnits)
	first := buyExactly(t, a, tokens[:2*bucketUnits], bucketUnits)
	cancelled := 0
	for tok, id := range first {
		if cancelled == bucketUnits/3 {
			break
		}
		if r := a.Do(t, "POST", "/api/v1/orders/"+id+"/cancel", tok, ""); r.Status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		cancelled++
	}
	buyExactly(t, a, tokens[2*bucketUnits:], bucketUnits/3) // the units given back
	a.Drain(t)
	return a
}

// A round split over 4 stock buckets audits clean once sold out, with
// some orders cancelled and their units sold again: the audit's equation
// sums the buckets' available, each bucket's own equation holds, and the
// stock report agrees.
func TestBucketedRoundAuditsClean(t *testing.T) {
	t.Parallel()
	a := soldBucketedRound(t)
	_, admin := a.User(t, "admin@example.com", "admin")
	if r := a.Do(t, "GET", "/api/v1/admin/audit", admin, ""); r.Status != http.StatusOK || r.JSON(t)["ok"] != true {
		t.Fatalf("audit: %d %s", r.Status, r.Body)
	}
	st := a.Do(t, "GET", "/api/v1/admin/products/flash/stock", admin, "").JSON(t)
	if st["available"] != 0.0 || st["released"] != float64(bucketUnits/3) || st["buckets"] != float64(bucketCount) {
		t.Fatalf("stock report %v", st)
	}
	var moved int64
	for b := range bucketCount {
		n, _ := a.Redis.Client.HGet(t.Context(), a.Stock.BucketKey("flash", b, bucketCount), "moved_in").Int64()
		moved += n
	}
	if moved == 0 {
		t.Fatal("no unit moved between buckets: the round did not exercise the moves")
	}
}

// A bucket whose counters were tampered with is named by a bucket
// problem: a unit made in bucket 2 (the round's sums show it too), and a
// unit shifted from bucket 2 to bucket 1 with no move recorded, which
// the round's sums cannot show.
func TestAuditNamesATamperedBucket(t *testing.T) {
	t.Parallel()
	a := soldBucketedRound(t)
	ctx := context.Background()
	key := func(b int) string { return a.Stock.BucketKey("flash", b, bucketCount) }
	steps := []struct {
		name    string
		tamper  func(by int64) // by -1 undoes it
		buckets []int
	}{
		{"made_in_bucket_2", func(by int64) { a.Redis.Client.HIncrBy(ctx, key(2), "available", by) }, []int{2}},
		{"shifted_unrecorded", func(by int64) {
			a.Redis.Client.HIncrBy(ctx, key(2), "available", -by)
			a.Redis.Client.HIncrBy(ctx, key(1), "available", by)
		}, []int{1, 2}},
	}
	for _, s := range steps {
		s.tamper(1)
		rep, err := audit.New(a.DB.Pool, a.Redis.Client, a.Stock, a.Config.KeyPrefix, a.Log).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var named []int
		for _, p := range rep.Problems {
			if p.Kind == "bucket" && p.Bucket != nil && p.SKU == "flash" {
				named = append(named, *p.Bucket)
			}
		}
		slices.Sort(named)
		if rep.OK || !slices.Equal(named, s.buckets) {
			t.Errorf("%s: buckets named %v, want %v; problems %+v", s.name, named, s.buckets, rep.Problems)
		}
		s.tamper(-1)
	}
}
