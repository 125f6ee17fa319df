package room_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/cache"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/room"
	"github.com/shop-oss/shop/internal/room/roomrule"
	"github.com/shop-oss/shop/internal/testenv"
)

// On a Redis Cluster every key of a room shares its SKU's slot (the sale
// hash's tag), so join.lua and admit.lua run there as on one Redis: the
// slots are Redis's (CLUSTER KEYSLOT). Shoppers join, two instances
// admit, the fairness answer and the record hold.
func TestRoomOnACluster(t *testing.T) {
	t.Parallel()
	c, rdb := testenv.StartOpenCluster(t, 3)
	ctx := context.Background()
	db := testenv.NewDatabase(t)
	stock := inventory.NewPartitionedStock(rdb, c.Prefix, keyspace.NewPartitions(6, true))
	log := slog.New(slog.DiscardHandler)
	rooms := room.New(db.Pool, rdb, stock, c.Prefix, log, room.Options{})
	other := room.New(db.Pool, rdb, stock, c.Prefix, log, room.Options{})
	sales := inventory.NewSalesWithRooms(db.Pool, stock, rooms)
	ch := cache.New(rdb, cache.Options{Prefix: c.Prefix + "cache:", TTL: time.Minute}, prometheus.NewRegistry())
	cat := inventory.NewCatalogOn(db.Pool, stock, ch, log, inventory.CatalogOptions{})
	keys := rooms.Keys()
	// The joins below take about a second on a quiet machine; a loaded
	// one may run past starts_at, and then the later joiners are late.
	starts := time.Now().Add(3 * time.Second)
	var rounds []int64
	for i := range 4 {
		sku := fmt.Sprintf("sku-%d", i)
		if _, err := cat.Create(ctx, sku, inventory.ProductInput{Name: sku, Category: "c", PriceCents: 100}); err != nil {
			t.Fatal(err)
		}
		rep, err := sales.Open(ctx, sku, inventory.Seed{Quantity: 100, PerUserLimit: 1, StartsAt: starts,
			Room: &inventory.RoomSettings{AdmitPerSecond: 50, PassTTL: time.Minute, ChallengeBits: 1}})
		if err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, *rep.RoundID)
		want := c.Slot(t, stock.SaleKey(sku))
		for _, k := range []string{keys.Passes(sku), keys.State(sku, *rep.RoundID), keys.Early(sku, *rep.RoundID),
			keys.Joined(sku, *rep.RoundID), keys.Late(sku, *rep.RoundID), keys.Admissions(sku, *rep.RoundID), keys.Challenge(sku, "00")} {
			if got := c.Slot(t, k); got != want {
				t.Fatalf("%s: slot %d, want the sale's %d", k, got, want)
			}
		}
	}
	users := make([]string, 20)
	for i := range users {
		users[i] = uuid.NewString()
		for j := range 4 {
			sku := fmt.Sprintf("sku-%d", j)
			chal, err := rooms.IssueChallenge(ctx, sku, users[i])
			if err != nil {
				t.Fatal(err)
			}
			proof := &room.Proof{Challenge: chal.Challenge, Nonce: roomrule.Solve(chal.Challenge, chal.Bits)}
			if _, created, err := rooms.Join(ctx, sku, users[i], proof, nil); err != nil || !created {
				t.Fatalf("join %s: %v %v", sku, created, err)
			}
		}
	}
	allEarly := time.Now().Before(starts)
	time.Sleep(time.Until(starts) + 1100*time.Millisecond)
	for range 5 {
		for j := range 4 {
			for _, svc := range []*room.Service{rooms, other} {
				if _, err := svc.AdmitTurn(ctx, fmt.Sprintf("sku-%d", j)); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for j := range 4 {
		sku := fmt.Sprintf("sku-%d", j)
		_, admitted, err := rooms.Counters(ctx, sku, rounds[j])
		if err != nil || admitted < 1 || admitted > 20 {
			t.Fatalf("%s admitted %d (%v)", sku, admitted, err)
		}
		page, err := rooms.EntryList(ctx, sku, 0, 100)
		if err != nil || len(page.Items) != 20 {
			t.Fatalf("%s entries: %d %v", sku, len(page.Items), err)
		}
		tk, err := rooms.TicketOf(ctx, sku, page.Items[0].UserID, nil)
		if err != nil || tk.State != room.StateAdmitted || tk.Pass == nil {
			t.Fatalf("%s first ticket: %+v %v", sku, tk, err)
		}
		fair, err := rooms.Fairness(ctx, sku)
		if err != nil || fair.Seed == nil || fair.EarlyEntries < 1 || fair.EarlyEntries > 20 ||
			(allEarly && fair.EarlyEntries != 20) || !fair.Live {
			t.Fatalf("%s fairness: %+v %v", sku, fair, err)
		}
	}
	if found, err := rooms.Audit(ctx); err != nil || len(found) != 0 {
		t.Fatalf("audit: %+v %v", found, err)
	}
	// Replaced, then recorded from the cluster.
	if _, err := sales.Open(ctx, "sku-0", inventory.Seed{Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	if err := rooms.Record(ctx, "sku-0", rounds[0]); err != nil {
		t.Fatal(err)
	}
	page, err := rooms.EntryList(ctx, "sku-0", 0, 100)
	if err != nil || len(page.Items) != 20 {
		t.Fatalf("recorded entries: %d %v", len(page.Items), err)
	}
}
