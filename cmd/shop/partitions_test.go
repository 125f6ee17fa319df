package main

import (
	"strings"
	"testing"
)

// Every command that opens the stores settles SHOP_ORDER_PARTITIONS
// against the count the orders in Redis are spread over: a process with
// another count would read and write other streams, and the orders in the
// old ones would never be written nor expire.
func TestCommandsRefuseAnotherPartitionCount(t *testing.T) {
	t.Parallel()
	_, env, run := onTestStores(t)
	shop := func(partitions string, args ...string) (string, error) {
		env["SHOP_ORDER_PARTITIONS"] = partitions
		return run(args...)
	}
	if out, err := shop("4", "seed", "demo"); err != nil {
		t.Fatalf("seed with 4 partitions: %v %s", err, out)
	}
	if out, err := shop("8", "seed", "demo"); err == nil || !strings.Contains(out, "SHOP_ORDER_PARTITIONS is 8") {
		t.Fatalf("seed with 8 partitions after 4: %v %s, want refused", err, out)
	}
	if out, err := shop("4", "seed", "demo"); err != nil {
		t.Fatalf("seed with 4 partitions again: %v %s", err, out)
	}
}
