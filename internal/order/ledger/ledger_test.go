package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/testenv"
)

// A bad id changes nothing: the script validates before it creates the
// stream and its group (a script that fails midway keeps its writes).
func TestAdvanceStreamRefusesABadIDBeforeWriting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	l := New(f.r.Client, f.r.Prefix, keyspace.Partitions{})
	if _, err := l.AdvanceStream(ctx, l.Keys(0), "not-an-id"); err == nil {
		t.Fatal("a bad id was accepted")
	}
	if n := f.r.Client.Exists(ctx, orderkey.New(f.r.Prefix, keyspace.Partitions{}).Stream(0)).Val(); n != 0 {
		t.Fatalf("the stream was created by a refused call")
	}
	last, err := l.AdvanceStream(ctx, l.Keys(0), "1700000000000-3")
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
	n, err := New(f.r.Client, f.r.Prefix, keyspace.Partitions{}).RestoreStatuses(ctx, []Confirmed{
		{OrderID: week, UserID: uuid.NewString(), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		{OrderID: month, UserID: uuid.NewString(), CreatedAt: now, ExpiresAt: now.Add(20 * 24 * time.Hour)},
	})
	if err != nil || n != 2 {
		t.Fatalf("restored %d, %v", n, err)
	}
	k := orderkey.New(f.r.Prefix, keyspace.Partitions{})
	if ttl := f.r.Client.PTTL(ctx, k.Status(week)).Val(); ttl < order.StatusTTL-time.Minute {
		t.Errorf("a status with an hour's window lives %v, want a week", ttl)
	}
	if ttl := f.r.Client.PTTL(ctx, k.Status(month)).Val(); ttl < 21*24*time.Hour-time.Minute {
		t.Errorf("a status with a 20-day window lives %v, want at least 21 days", ttl)
	}
}

// On partitioned streams a restored status names its home partition, and
// its payment due time goes in that partition's due set, whose sweeper
// expires it: an order whose lines share a partition has that home; one
// spanning partitions gets one of its lines' (PostgreSQL does not keep
// which came first), where a single Redis's writers and sweepers reach it.
func TestRestoreStatusesInTheirHomePartition(t *testing.T) {
	t.Parallel()
	parts := keyspace.NewPartitions(4, false)
	f := newPartitionedFixture(t, parts)
	ctx := context.Background()
	bySKU := map[int]string{}
	for i := 0; len(bySKU) < 3; i++ {
		sku := fmt.Sprintf("h-%d", i)
		if p := parts.Of(sku); p != 0 && bySKU[p] == "" {
			bySKU[p] = sku
		}
	}
	var homes []int
	for p := range bySKU {
		homes = append(homes, p)
	}
	slices.Sort(homes)
	one, two := uuid.NewString(), uuid.NewString()
	now := time.Now()
	l := New(f.r.Client, f.r.Prefix, parts)
	n, err := l.RestoreStatuses(ctx, []Confirmed{
		{OrderID: one, UserID: uuid.NewString(), CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			Items: []order.ReservedItem{{SKU: bySKU[homes[0]], Quantity: 1, RoundID: 1}}},
		{OrderID: two, UserID: uuid.NewString(), CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			Items: []order.ReservedItem{{SKU: bySKU[homes[1]], Quantity: 1, RoundID: 2}, {SKU: bySKU[homes[2]], Quantity: 1, RoundID: 3}}},
	})
	if err != nil || n != 2 {
		t.Fatalf("restored %d, %v", n, err)
	}
	k := l.Partitions()
	for id, want := range map[string][]int{one: {homes[0]}, two: {homes[1], homes[2]}} {
		got, ok := StatusHash(f.r.Client.HGetAll(ctx, k[0].StatusKey(id)).Val()).Home()
		if !ok || !slices.Contains(want, got) {
			t.Fatalf("order %s restored in partition %d (%v), want one of %v", id, got, ok, want)
		}
		for p := range k {
			if due := f.r.Client.ZScore(ctx, k[p].Due, id).Err() == nil; due != (p == got) {
				t.Fatalf("order %s: in partition %d's due set: %v; its home is %d", id, p, due, got)
			}
		}
	}
	// The lifecycle reads the home back: its transitions go there.
	if _, err := f.svc.Pay(ctx, f.r.Client.HGet(ctx, k[0].StatusKey(one), "user_id").Val(), one, "tok_visa"); err != nil {
		t.Fatalf("pay the restored order: %v", err)
	}
	for p := range k {
		n := len(f.r.Client.XRange(ctx, k[p].Stream, "-", "+").Val())
		if home := p == homes[0]; (n == 1) != home || n > 1 {
			t.Fatalf("partition %d's stream has %d events of the restored order; its home is %d", p, n, homes[0])
		}
	}
}

// A status key names its order; other keys matching the pattern do not.
func TestStatusIDReadsStatusKeys(t *testing.T) {
	parts := keyspace.NewPartitions(3, true)
	k := New(nil, "p:", parts).Partitions()
	id := uuid.NewString()
	if got, ok := k[2].StatusID(k[1].StatusKey(id)); !ok || got != id {
		t.Fatalf("StatusID(%q) = %q %v", k[1].StatusKey(id), got, ok)
	}
	for _, key := range []string{"p:order:" + id + ":noidem", "p:order:x", "q:order:" + id, k[0].StatusKey(id)[:10]} {
		if got, ok := k[0].StatusID(key); ok {
			t.Fatalf("StatusID(%q) = %q, want none", key, got)
		}
	}
	// One pattern matches every partition's status hashes (their names
	// differ by the home's tag on a cluster).
	for p := range parts.Count() {
		key := k[0].StatusKey(parts.Stamp(uuid.New(), p).String())
		if pre := strings.TrimSuffix(k[p].StatusPattern, "*"); !strings.HasPrefix(key, pre) || pre == "p:" {
			t.Fatalf("pattern %q does not match %q", k[p].StatusPattern, key)
		}
	}
	if len(k) != 3 || k[1].Partition != 1 || k[1].Stream == k[2].Stream || k[1].Due != k[1].Stream+":due" {
		t.Fatalf("partition keys %+v", k)
	}
}

type fixture struct {
	svc *order.Service
	r   *testenv.Redis
}

// newFixture is an order service on fresh stores.
func newFixture(t *testing.T) fixture { return newPartitionedFixture(t, keyspace.Partitions{}) }

// newPartitionedFixture is an order service on fresh stores whose orders
// go to parts.
func newPartitionedFixture(t *testing.T, parts keyspace.Partitions) fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	stock := inventory.NewPartitionedStock(r.Client, r.Prefix, parts)
	exists := func(context.Context, string) (bool, error) { return false, nil }
	svc := order.New(db.Pool, r.Client, stock, exists, r.Prefix, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), order.Options{})
	return fixture{svc: svc, r: r}
}
