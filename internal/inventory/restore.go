package inventory

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed restore.lua
	restoreLua    string
	restoreScript = redis.NewScript(restoreLua)
)

// Fence is what a SKU's sale hash held when a caller started rebuilding
// its state elsewhere (round, available, released): Restore applies the
// rebuilt state only if the hash still holds it. Every reservation and
// every release changes available or released, so an unchanged fence
// means no unit of the SKU moved meanwhile.
type Fence string

// ErrMoved: the SKU's stock changed since the fence was read; nothing was
// written. Read the fence and the state again.
var ErrMoved = errors.New("the live stock changed since it was read")

// ReadFence reads sku's fence.
func (s *Stock) ReadFence(ctx context.Context, sku string) (Fence, error) {
	v, err := s.rdb.HMGet(ctx, s.SaleKey(sku), "round", "available", "released").Result()
	if err != nil {
		return "", fmt.Errorf("read the stock fence of %s: %w", sku, err)
	}
	parts := make([]string, len(v))
	for i, x := range v {
		if x != nil {
			parts[i] = fmt.Sprint(x)
		}
	}
	return Fence(strings.Join(parts, " ")), nil
}

// Restored is the state Restore puts in place of a SKU's live round.
type Restored struct {
	LiveRound
	// Buyers are the units each user's orders hold this round (users
	// holding none left out); they must add up to Quantity - Available.
	Buyers map[string]int64
	// ReleasedOrders are the orders of the round whose units went back
	// (cancelled, expired): Release gives nothing back for them again.
	// LiveRound.Released is their units.
	ReleasedOrders []string
}

// Restore replaces sku's live round, buyer counts and released set with r
// in one atomic step, if the fence still holds (else ErrMoved, nothing
// written). The script checks that r adds up before it writes; a state
// equal to the one in place writes nothing (changed false), so running
// it twice is running it once. Subscribers to the SKU's changes hear the
// new state.
func (s *Stock) Restore(ctx context.Context, sku string, fence Fence, r Restored) (changed bool, err error) {
	var ttlMs int64
	if !r.EndsAt.IsZero() {
		ttlMs = max(r.EndsAt.Add(7*24*time.Hour).UnixMilli()-time.Now().UnixMilli(), 1)
	}
	args := []any{string(fence), r.Round, r.Quantity, r.PerUserLimit, unixMilli(r.StartsAt), unixMilli(r.EndsAt),
		r.PriceCents, ttlMs, r.Available, r.Released, s.ChangesChannel(sku), len(r.Buyers)}
	for _, u := range slices.Sorted(maps.Keys(r.Buyers)) {
		args = append(args, u, r.Buyers[u])
	}
	args = append(args, len(r.ReleasedOrders))
	for _, id := range r.ReleasedOrders {
		args = append(args, id)
	}
	args = append(args, r.roomArgs()...)
	args = append(args, s.PublishCommand())
	out, err := restoreScript.Run(ctx, s.rdb, []string{s.SaleKey(sku), s.BuyersKey(sku), s.releasedKey(sku)}, args...).Slice()
	if err != nil {
		return false, fmt.Errorf("restore the live stock of %s: %w", sku, err)
	}
	if len(out) == 2 && out[0] == "moved" {
		return false, fmt.Errorf("restore the live stock of %s: %w (now %q, read %q)", sku, ErrMoved, out[1], fence)
	}
	n, _ := out[1].(int64)
	return n == 1, nil
}
