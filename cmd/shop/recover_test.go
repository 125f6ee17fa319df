package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// `shop recover` as the binary runs it: on a sound demo it changes
// nothing; a unit from nowhere is taken back (and the audit is clean
// again); an accepted id neither store has is printed as lost and exits
// 1; a file line that is no order id is refused, naming the line.
func TestRecoverCommand(t *testing.T) {
	t.Parallel()
	r, _, shop := onTestStores(t)
	if out, err := shop("seed", "demo"); err != nil {
		t.Fatalf("seed: %v %s", err, out)
	}
	out, err := shop("recover")
	if err != nil || strings.Contains(out, "rebuilt") || !strings.Contains(out, "of phone-x1:") {
		t.Fatalf("recover of the demo: %v %s", err, out)
	}
	r.Client.HIncrBy(context.Background(), r.Prefix+"sale:{phone-x1}", "available", 1)
	if out, err := shop("recover"); err != nil || !strings.Contains(out, "of phone-x1:") || strings.Count(out, "rebuilt") != 1 {
		t.Fatalf("recover after a unit appeared from nowhere: %v %s", err, out)
	}
	if out, err := shop("audit"); err != nil {
		t.Fatalf("audit after recover: %v %s", err, out)
	}

	dir := t.TempDir()
	lost := uuid.NewString()
	file := filepath.Join(dir, "accepted")
	if err := os.WriteFile(file, []byte("# the driver's 202s\n"+lost+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = shop("recover", "--accepted", file)
	if err == nil || !strings.Contains(out, "lost "+lost+"\n") || !strings.Contains(out, "1 accepted orders checked, 1 lost") {
		t.Fatalf("recover with a lost order: %v %s", err, out)
	}
	if err := os.WriteFile(file, []byte(lost+"\nnot-an-id\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := shop("recover", "--accepted", file); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("recover with a bad line: %v %s", err, out)
	}
}
