package testenv_test

import (
	"context"
	"testing"

	"github.com/shop-oss/shop/internal/testenv"
)

// A cluster of one master (make bench-cluster's 1-master setup) holds
// every slot and reports its own address in CLUSTER SLOTS, so a cluster
// client reaches it for keys of any slot.
func TestStartClusterOfOneMaster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 1)
	ctx := context.Background()
	slots, err := c.Client.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || slots[0].Start != 0 || slots[0].End != 16383 || slots[0].Nodes[0].Addr != c.Masters[0].URL[len("redis://"):len(c.Masters[0].URL)-len("/0")] {
		t.Fatalf("CLUSTER SLOTS of one master: %+v (master %s)", slots, c.Masters[0].URL)
	}
	for _, key := range []string{"a", "b", c.Prefix + "{x}y"} {
		if err := c.Client.Set(ctx, key, 1, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
}
