package main

import (
	"context"
	"strings"
	"testing"
)

// The commands that work on the stores, run as the binary runs them: after
// the demo seed, `shop audit` exits 0 and `shop bestsellers rebuild`
// succeeds; a unit that appears from nowhere in the live stock makes the
// audit fail, naming the SKU.
func TestAuditAndRebuildCommands(t *testing.T) {
	t.Parallel()
	r, _, shop := onTestStores(t)
	if out, err := shop("seed", "demo"); err != nil {
		t.Fatalf("seed: %v %s", err, out)
	}
	if out, err := shop("audit"); err != nil || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("audit of the demo: %v %s", err, out)
	}
	if out, err := shop("bestsellers", "rebuild"); err != nil || !strings.Contains(out, "rebuilt") {
		t.Fatalf("rebuild: %v %s", err, out)
	}
	r.Client.HIncrBy(context.Background(), r.Prefix+"sale:{phone-x1}", "available", 1)
	if out, err := shop("audit"); err == nil || !strings.Contains(out, "phone-x1") {
		t.Fatalf("audit after a unit appeared from nowhere: %v %s", err, out)
	}
}
