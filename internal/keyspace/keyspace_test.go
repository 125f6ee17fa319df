package keyspace_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/testenv"
)

// Slot is Redis's own CLUSTER KEYSLOT, hash tags and their corner cases
// included; the partition tags spread evenly over a cluster's masters.
func TestSlotsAndPartitionsOnACluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	keys := []string{"", "a", "shop:orders", "shop:sale:{p-1}", "shop:sale:{o3.2}p-1:buyers", "{}x", "x{}y{z}",
		"{a}{b}", "{", "}{", "a{b", "shop:rl:{203.0.113.7}", "\xff\x00{é}"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("shop:sale:{sku-%d}", i), fmt.Sprintf("user:%d", i))
	}
	for _, k := range keys {
		if got, want := keyspace.Slot(k), int(c.Slot(t, k)); got != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
		}
	}

	owner := map[int]string{} // slot -> master address
	slots, err := testenv.ClusterSlots(context.Background(), c.Client)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		for slot := s.Start; slot <= s.End; slot++ {
			owner[slot] = s.Nodes[0].Addr
		}
	}
	for _, n := range []int{3, 6, 12} {
		p := keyspace.NewPartitions(n, true)
		per := map[string]int{}
		for k := range n {
			per[owner[keyspace.Slot(p.Tag(k))]]++
		}
		if len(per) != 3 {
			t.Errorf("%d partitions on %d masters: %v", n, len(per), per)
		}
		for addr, got := range per {
			if got != n/3 {
				t.Errorf("%d partitions: %s holds %d, want %d", n, addr, got, n/3)
			}
		}
	}
}

// Every SKU falls in one partition, the same in every process, and one
// partition is the zero value's layout.
func TestPartitionsOf(t *testing.T) {
	p := keyspace.NewPartitions(8, false)
	seen := map[int]int{}
	for i := range 1000 {
		k := p.Of(fmt.Sprintf("sku-%d", i))
		if k < 0 || k >= 8 {
			t.Fatalf("partition %d of 8", k)
		}
		seen[k]++
	}
	for k := range 8 {
		if seen[k] < 60 {
			t.Errorf("partition %d got %d of 1000 SKUs", k, seen[k])
		}
	}
	var zero keyspace.Partitions
	if zero.Count() != 1 || zero.Of("x") != 0 || !zero.Legacy(0) || zero.Grouped() {
		t.Fatalf("zero Partitions: %+v", zero)
	}
	if keyspace.NewPartitions(8, true).Legacy(0) {
		t.Fatal("a grouped partition 0 kept the untagged names: its SKUs' slot would differ from its stream's")
	}
}

// A stamped id names its partition, stays a valid UUIDv7 in time order,
// and stays unique; a single Redis stamps nothing.
func TestStampAndHome(t *testing.T) {
	p := keyspace.NewPartitions(12, true)
	seen := map[uuid.UUID]bool{}
	var prev uuid.UUID
	for i := range 5000 {
		id := p.Stamp(uuid.Must(uuid.NewV7()), i%12)
		if got := p.Home(id.String()); got != i%12 {
			t.Fatalf("Home(Stamp(id, %d)) = %d", i%12, got)
		}
		if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
			t.Fatalf("stamped id %s is not a UUIDv7 (version %d, variant %v)", id, id.Version(), id.Variant())
		}
		if seen[id] {
			t.Fatalf("stamped id %s twice", id)
		}
		seen[id] = true
		if i > 0 && bytes.Compare(id[:6], prev[:6]) < 0 {
			t.Fatalf("stamped ids out of time order: %s after %s", id, prev)
		}
		prev = id
	}
	// A client's id can carry any last byte: it names some partition.
	if got := p.Home("01939a4e-0000-7000-8000-0000000000ff"); got != 0xff%12 {
		t.Fatalf("Home of a foreign id = %d, want %d", got, 0xff%12)
	}
	for _, bad := range []string{"", "x", "not-a-uuid"} {
		if got := p.Home(bad); got != 0 {
			t.Fatalf("Home(%q) = %d, want 0", bad, got)
		}
	}
	single := keyspace.NewPartitions(4, false)
	id := uuid.Must(uuid.NewV7())
	if single.Stamp(id, 3) != id || single.Home(id.String()) != 0 {
		t.Fatal("a single Redis stamped an order id")
	}
}
