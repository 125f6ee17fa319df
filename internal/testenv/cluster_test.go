package testenv_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/testenv"
)

// A cluster of one master (make bench-cluster's 1-master setup) holds
// every slot and reports its own address in CLUSTER SLOTS, so a cluster
// client reaches it for keys of any slot.
func TestStartClusterOfOneMaster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 1)
	ctx := context.Background()
	slots, err := testenv.ClusterSlots(ctx, c.Client)
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

// ClusterSlots, built from CLUSTER SHARDS, answers what CLUSTER SLOTS
// does on a cluster with replicas: the same ranges, the same master
// first, the same replicas.
func TestClusterSlotsMatchesClusterSlotsCommand(t *testing.T) {
	t.Parallel()
	c := testenv.StartClusterWithReplicas(t, 3)
	ctx := context.Background()
	opts, err := redis.ParseURL(c.Masters[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	node := redis.NewClient(opts) // both questions to the one node
	t.Cleanup(func() { _ = node.Close() })
	// The raw command, as go-redis's deprecated ClusterSlots sends it,
	// asked until gossip has told this node of every replica.
	var want []redis.ClusterSlot
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cmd := redis.NewClusterSlotsCmd(ctx, "cluster", "slots")
		if err := node.Process(ctx, cmd); err != nil {
			t.Fatal(err)
		}
		want = cmd.Val()
		if everyRangeReplicated(want) || time.Now().After(deadline) {
			break
		}
	}
	got, err := testenv.ClusterSlots(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !reflect.DeepEqual(slotView(got), slotView(want)) {
		t.Fatalf("ClusterSlots:\n%v\nCLUSTER SLOTS:\n%v", slotView(got), slotView(want))
	}
}

func everyRangeReplicated(slots []redis.ClusterSlot) bool {
	for _, s := range slots {
		if len(s.Nodes) < 2 {
			return false
		}
	}
	return len(slots) > 0
}

// slotView is each range as "start-end master [replicas sorted]", sorted.
func slotView(slots []redis.ClusterSlot) []string {
	var view []string
	for _, s := range slots {
		var replicas []string
		for _, n := range s.Nodes[1:] {
			replicas = append(replicas, n.Addr)
		}
		sort.Strings(replicas)
		view = append(view, fmt.Sprintf("%d-%d %s %v", s.Start, s.End, s.Nodes[0].Addr, replicas))
	}
	sort.Strings(view)
	return view
}
