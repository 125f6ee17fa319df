package recoverytest

import (
	"context"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/recovery"
	"github.com/shop-oss/shop/internal/shop/shoptest"
)

// A roomed round whose live state a failover lost comes back with its
// waiting room: the same settings, seed and secret, so its buyers still
// need passes, its entry ids stay the same, and a second run changes
// nothing.
func TestRecoverKeepsTheWaitingRoom(t *testing.T) {
	t.Parallel()
	a := shoptest.New(t, shoptest.Options{})
	ctx, rdb := context.Background(), a.Redis.Client
	a.Product(t, "r", 100)
	room := &inventory.RoomSettings{AdmitPerSecond: 7, PassTTL: time.Minute, ChallengeBits: 3}
	a.Round(t, "r", inventory.Seed{Quantity: 5, PerUserLimit: 1, Room: room})
	before, _, err := a.Stock.Live(ctx, "r")
	if err != nil || before.Room == nil {
		t.Fatalf("live: %+v %v", before, err)
	}
	rdb.Unlink(ctx, a.Stock.SaleKey("r"))
	rec := recovery.New(a.DB.Pool, rdb, a.Stock, a.Config.KeyPrefix, a.Log)
	if _, err := rec.Run(ctx, nil); err != nil {
		t.Fatal(err)
	}
	after, ok, err := a.Stock.Live(ctx, "r")
	if err != nil || !ok || after.Room == nil || *after.Room != *before.Room || after.Available != 5 {
		t.Fatalf("after recovery: %+v (room %+v), before room %+v (%v)", after, after.Room, before.Room, err)
	}
	rep, err := rec.Run(ctx, nil)
	if err != nil || len(rep.Rounds) != 1 || rep.Rounds[0].Changed {
		t.Fatalf("second run: %+v %v", rep.Rounds, err)
	}
}
