package shoptest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/room/roomkey"
)

// RoomSale is Sale of a round with a waiting room: buying it needs a pass
// (Admit).
func (a *App) RoomSale(t testing.TB, sku string, price int64, quantity, limit int) int64 {
	t.Helper()
	a.Product(t, sku, price)
	return a.Round(t, sku, inventory.Seed{Quantity: quantity, PerUserLimit: limit,
		Room: &inventory.RoomSettings{AdmitPerSecond: 10, PassTTL: 2 * time.Minute}})
}

// Admit gives user a pass of sku's round, live for an hour, as the room's
// admitter would (the pass hash, in room's format), and returns it.
func (a *App) Admit(t testing.TB, sku, user string, round int64) string {
	t.Helper()
	pass := uuid.NewString()
	now := time.Now()
	field := fmt.Sprintf("%d %s %d %d", round, pass, now.Add(time.Hour).UnixMilli(), now.UnixMilli())
	if err := a.Redis.Client.HSet(context.Background(), roomkey.New(a.Stock).Passes(sku), user, field).Err(); err != nil {
		t.Fatal(err)
	}
	return pass
}
