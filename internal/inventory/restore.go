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
	return s.ReadBucketFence(ctx, sku, 0, 1)
}

// ReadBucketFence reads the fence of bucket b of sku's round of buckets.
func (s *Stock) ReadBucketFence(ctx context.Context, sku string, b, buckets int) (Fence, error) {
	v, err := s.rdb.HMGet(ctx, s.BucketKey(sku, b, buckets), "round", "available", "released").Result()
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
	// Bucket, when set, makes the state one stock bucket's of a round of
	// several: Available, Buyers, Released and ReleasedOrders are the
	// bucket's own.
	Bucket *RestoredBucket
}

// RestoredBucket is a stock bucket's own fields in a Restored state
// (docs/design/buckets.md, "Recovery"): chosen so that its equation,
// seeded + moved_in + released = available + taken + moved_out, holds.
type RestoredBucket struct {
	Bucket, Buckets           int
	Seeded, MovedIn, MovedOut int64
	// Carried is the given-back units its lines carry to PostgreSQL's
	// CHECK besides its own released: round_released on a single Redis,
	// released_in on a cluster.
	Carried int64
}

func (b *RestoredBucket) args(grouped bool) []any {
	if b == nil {
		return []any{0}
	}
	carried := "round_released"
	if grouped {
		carried = "released_in"
	}
	return []any{6, "bucket", b.Bucket, "buckets", b.Buckets, "seeded", b.Seeded,
		"moved_in", b.MovedIn, "moved_out", b.MovedOut, carried, b.Carried}
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
	b, of := 0, 1
	if r.Bucket != nil {
		b, of = r.Bucket.Bucket, r.Bucket.Buckets
	}
	sale := s.BucketKey(sku, b, of)
	keys := []string{sale, s.BucketBuyersKey(sku, b, of), sale + ":released"}
	if r.Bucket != nil {
		keys = append(keys, sale+":moves", sale+":moved")
	}
	args := []any{string(fence), r.Round, r.Quantity, r.PerUserLimit, unixMilli(r.StartsAt), unixMilli(r.EndsAt),
		r.PriceCents, ttlMs, r.Available, r.Released, s.BucketChannel(sku, b, of), len(r.Buyers)}
	for _, u := range slices.Sorted(maps.Keys(r.Buyers)) {
		args = append(args, u, r.Buyers[u])
	}
	args = append(args, len(r.ReleasedOrders))
	for _, id := range r.ReleasedOrders {
		args = append(args, id)
	}
	args = append(args, r.roomArgs()...)
	args = append(args, s.PublishCommand())
	args = append(args, r.Bucket.args(s.parts.Grouped())...)
	out, err := restoreScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return false, fmt.Errorf("restore the live stock of %s: %w", sku, err)
	}
	if len(out) == 2 && out[0] == "moved" {
		return false, fmt.Errorf("restore the live stock of %s: %w (now %q, read %q)", sku, ErrMoved, out[1], fence)
	}
	n, _ := out[1].(int64)
	return n == 1, nil
}
