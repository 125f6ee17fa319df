package order

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed won.lua
	wonLua    string
	wonScript = redis.NewScript(wonLua)
)

// Won is a draw's won entry as its order is written.
type Won struct {
	EntryID, UserID, SKU string
	Round                int64
	Units                int
	PriceCents           int64
	Payment              Payment // the capture
}

// wonNamespace makes a won entry's order id from its entry id.
var wonNamespace = uuid.MustParse("4f0e9c1a-5d0b-4d53-9a57-2f1c3e8b7d60")

// WonOrderID is the id of the order entry entryID of sku becomes: a UUID
// v5 of the entry id, stamped with the SKU's partition as Place stamps
// its ids.
func (s *Service) WonOrderID(entryID, sku string) string {
	id := uuid.NewSHA1(wonNamespace, []byte(entryID))
	return s.keys.Parts().Stamp(id, s.keys.Parts().Of(sku)).String()
}

// PlaceWon writes w's paid order (won.lua): its units taken from the live
// round, the order and its paid transition on the stream for the writer,
// its payment recorded. Once per entry however often it is called.
func (s *Service) PlaceWon(ctx context.Context, w Won) (string, error) {
	id := s.WonOrderID(w.EntryID, w.SKU)
	home := s.keys.Parts().Of(w.SKU)
	keys := []string{s.keys.Stream(home), s.keys.Status(id), s.stock.SaleKey(w.SKU), s.stock.BuyersKey(w.SKU)}
	err := wonScript.Run(ctx, s.rdb, keys, id, w.UserID, w.Round, w.Units, w.PriceCents, w.SKU, w.Payment.ID,
		s.statusTTL().Milliseconds(), strconv.Itoa(home)).Err()
	if err != nil {
		return "", fmt.Errorf("place the order of won entry %s: %w", w.EntryID, err)
	}
	if err := s.savePayment(ctx, id, w.Payment); err != nil {
		return "", fmt.Errorf("record the payment of won entry %s: %w", w.EntryID, err)
	}
	return id, nil
}
