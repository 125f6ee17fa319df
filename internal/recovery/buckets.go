package recovery

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/shop-oss/shop/internal/inventory"
)

// A round of several stock buckets is rebuilt bucket by bucket, each
// under its own fence (on a cluster the buckets lie in several slots):
// docs/design/buckets.md, "Recovery".

// readFences reads the fence of each of lr's buckets, bucket 0 first.
func (r *Recoverer) readFences(ctx context.Context, lr liveRound) ([]inventory.Fence, error) {
	out := make([]inventory.Fence, max(lr.buckets, 1))
	for b := range out {
		var err error
		if out[b], err = r.stock.ReadBucketFence(ctx, lr.sku, b, len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// restoreRound writes st, the rebuilt round, in place of lr's live state:
// bucket by bucket for a round of several, bucket 0 last, each under its
// fence (inventory.ErrMoved when one moved: the caller reads them all
// again and rebuilds).
func (r *Recoverer) restoreRound(ctx context.Context, lr liveRound, fences []inventory.Fence, st inventory.Restored, orders map[string]*holding) (bool, error) {
	if len(fences) == 1 {
		return r.stock.Restore(ctx, lr.sku, fences[0], st)
	}
	changed := false
	states := splitBuckets(st, orders, fenceAvailable(fences), r.stock.Partitions().Grouped())
	for b := len(states) - 1; b >= 0; b-- {
		c, err := r.stock.Restore(ctx, lr.sku, fences[b], states[b])
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	return changed, nil
}

// fenceAvailable is each fence's available units (0 for a bucket gone).
func fenceAvailable(fences []inventory.Fence) []int64 {
	out := make([]int64, len(fences))
	for b, f := range fences {
		if fs := strings.Split(string(f), " "); len(fs) == 3 {
			out[b], _ = strconv.ParseInt(fs[1], 10, 64)
		}
	}
	return out
}

// splitBuckets splits the rebuilt round st over its buckets, each
// bucket's available as much of the round's as it has now (current),
// from the last bucket down, and the rest in bucket 0, written last: a
// bucket written before the others never holds more units than it had,
// so the round never offers more than before while it is rebuilt. A
// buyer's count and orders go to their home bucket. The moves under way
// go (their units are counted in available), and each bucket's own
// counters are chosen so that its equation holds: seeded is what it
// holds (available and its buyers' units); on a cluster a bucket's
// releases are its buyers' (release.lua gives them to the home bucket),
// on a single Redis they are all bucket 0's, and each other bucket's
// buyers' are moved back to it (bucket 0's moved_out, its moved_in).
// Every bucket's lines carry the round's releases to PostgreSQL's
// CHECK: looser than the units it holds would need, never short.
func splitBuckets(st inventory.Restored, orders map[string]*holding, current []int64, grouped bool) []inventory.Restored {
	n := len(current)
	out := make([]inventory.Restored, n)
	held, given := make([]int64, n), make([]int64, n)
	for b := range out {
		out[b] = inventory.Restored{LiveRound: st.LiveRound, Buyers: map[string]int64{}, Bucket: &inventory.RestoredBucket{Bucket: b, Buckets: n}}
		out[b].Available, out[b].Released = 0, 0
	}
	for id, h := range orders {
		b := inventory.HomeBucket(h.user, n)
		if h.holds() {
			out[b].Buyers[h.user] += h.units
			held[b] += h.units
		} else {
			given[b] += h.units
			out[b].ReleasedOrders = append(out[b].ReleasedOrders, id)
		}
	}
	left := st.Available
	for b := n - 1; b > 0; b-- {
		out[b].Available = min(max(current[b], 0), left)
		left -= out[b].Available
	}
	out[0].Available = left
	for b := range out {
		c := out[b].Bucket
		c.Seeded, c.Carried = out[b].Available+held[b], st.Released-given[b]
		out[b].Released = given[b]
		slices.Sort(out[b].ReleasedOrders)
		if !grouped && b > 0 {
			c.MovedIn, c.Carried = given[b], st.Released
			out[0].Bucket.MovedOut += given[b]
			out[b].Released, out[b].ReleasedOrders = 0, nil
		}
	}
	if !grouped {
		out[0].Released, out[0].ReleasedOrders, out[0].Bucket.Carried = st.Released, st.ReleasedOrders, st.Released
	}
	return out
}
