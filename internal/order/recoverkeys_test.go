package order

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/keyspace"
)

// A bad id changes nothing: the script validates before it creates the
// stream and its group (a script that fails midway keeps its writes).
func TestAdvanceStreamRefusesABadIDBeforeWriting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := AdvanceStream(ctx, f.r.Client, AuditKeys(f.r.Prefix), "not-an-id"); err == nil {
		t.Fatal("a bad id was accepted")
	}
	if n := f.r.Client.Exists(ctx, keys{prefix: f.r.Prefix}.stream(0)).Val(); n != 0 {
		t.Fatalf("the stream was created by a refused call")
	}
	last, err := AdvanceStream(ctx, f.r.Client, AuditKeys(f.r.Prefix), "1700000000000-3")
	if err != nil || last != "1700000000000-3" {
		t.Fatalf("advance: %q, %v", last, err)
	}
}

// A restored status lives at least a day past its payment window, as a
// new order's does, even when the window is longer than the week a status
// hash otherwise lives: else the sweeper would find no status, drop the
// order from the due set, and its units would stay held.
func TestRestoredStatusOutlivesItsPaymentWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	week, month := uuid.NewString(), uuid.NewString()
	now := time.Now()
	n, err := RestoreStatuses(ctx, f.r.Client, f.r.Prefix, keyspace.Partitions{}, []Confirmed{
		{OrderID: week, UserID: uuid.NewString(), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		{OrderID: month, UserID: uuid.NewString(), CreatedAt: now, ExpiresAt: now.Add(20 * 24 * time.Hour)},
	})
	if err != nil || n != 2 {
		t.Fatalf("restored %d, %v", n, err)
	}
	k := keys{prefix: f.r.Prefix}
	if ttl := f.r.Client.PTTL(ctx, k.status(week)).Val(); ttl < statusTTL-time.Minute {
		t.Errorf("a status with an hour's window lives %v, want a week", ttl)
	}
	if ttl := f.r.Client.PTTL(ctx, k.status(month)).Val(); ttl < 21*24*time.Hour-time.Minute {
		t.Errorf("a status with a 20-day window lives %v, want at least 21 days", ttl)
	}
}
