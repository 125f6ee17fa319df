package order

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/keyspace"
)

// Expiry is the lifecycle's side of the expiry sweeper
// (internal/order/sweeper): the sets it claims orders from, and the
// one-order steps it takes on what it claimed. The step decides (the
// guarded release), so the sweeper need only claim and call.
type Expiry struct{ life *lifecycle }

// NewExpiry returns the expiry steps of the orders under prefix.
func NewExpiry(rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger) *Expiry {
	return &Expiry{life: newLifecycle(rdb, stock, prefix, log)}
}

// Partitions are the order partitions, each with its due set and, on a
// cluster, its owed set.
func (e *Expiry) Partitions() keyspace.Partitions { return e.life.keys.Parts() }

// DueKey is partition p's due set: orders awaiting payment, scored by
// expires_ms (a claimed one by its lease's end).
func (e *Expiry) DueKey(p int) string { return e.life.keys.Due(p) }

// OwedKey is partition p's owed set: spread orders whose releases may be
// unfinished (owed.go), scored by when a sweeper may finish them.
func (e *Expiry) OwedKey(p int) string { return e.life.keys.Owed(p) }

// Expire expires order id, claimed from partition p's due set, if it
// still awaits payment, and returns the units it gave back; expired is
// false when it did not (paid, cancelled, gone, another sweeper was
// first), and the order then leaves the due set.
func (e *Expiry) Expire(ctx context.Context, p int, id string) (units int64, expired bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	o, found, err := e.life.read(ctx, id)
	if err != nil {
		return 0, false, fmt.Errorf("expire order %s: %w", id, err)
	}
	if found && (o.Status == StatusPending || o.Status == StatusConfirmed) {
		r, err := e.life.giveBack(ctx, o, StatusExpired)
		if err != nil {
			return 0, false, fmt.Errorf("expire order %s: %w", id, err)
		}
		if !r.Refused {
			return r.Units, true, nil
		}
	}
	if err := e.life.rdb.ZRem(ctx, e.life.keys.Due(p), id).Err(); err != nil {
		return 0, false, fmt.Errorf("drop order %s from the due set: %w", id, err)
	}
	return 0, false, nil
}

// SettleOwed settles spread order id, claimed from partition p's owed
// set, by its status: done is true when its entry is gone (nothing is or
// will be owed, or everything owed went back).
func (e *Expiry) SettleOwed(ctx context.Context, p int, id string) (done bool, err error) {
	return e.life.settle(ctx, p, id)
}
