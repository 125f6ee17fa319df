package orderkey

import (
	"context"
	"errors"
	"testing"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// The partition count is settled by the first process; a later one with
// another count is refused (its orders' keys would be other keys), except
// raising 1 on a single Redis, whose partition 0 keeps its stream.
func TestSettlePartitions(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx, rdb, pre := context.Background(), r.Client, r.Prefix
	steps := []struct {
		n       int
		refused bool
	}{
		{1, false}, {1, false}, // recorded, then the same again
		{4, false}, // 1 raised on a single Redis
		{4, false},
		{8, true}, // 4 -> 8 would move partitions 1-3
		{2, true}, // and lowering strands partitions
		{4, false},
	}
	for i, s := range steps {
		err := SettlePartitions(ctx, rdb, pre, keyspace.NewPartitions(s.n, false))
		if s.refused != errors.Is(err, ErrPartitionsChanged) || !s.refused && err != nil {
			t.Fatalf("step %d (%d partitions): %v, refused want %v", i, s.n, err, s.refused)
		}
	}
	if got := rdb.Get(ctx, PartitionsKey(pre)).Val(); got != "4" {
		t.Fatalf("recorded %q, want 4", got)
	}
	// On a cluster even a recorded 1 is not raised: every SKU is re-tagged.
	other := r.Prefix + "c:"
	if err := SettlePartitions(ctx, rdb, other, keyspace.NewPartitions(1, true)); err != nil {
		t.Fatal(err)
	}
	if err := SettlePartitions(ctx, rdb, other, keyspace.NewPartitions(12, true)); !errors.Is(err, ErrPartitionsChanged) {
		t.Fatalf("grouped 1 -> 12: %v, want refused", err)
	}
}
