package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The curl walk-through of docs/getting-started.md, run twice in a row
// against `shop serve` on the demo seed, answers each step with the
// status its comment shows: a newcomer can run it again and read the same.
func TestGettingStartedWalkThroughRunsTwice(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walk-through needs %s: %v", tool, err)
		}
	}
	block, want := walkThrough(t)
	base := serveDemo(t)
	for run := 1; run <= 2; run++ {
		got := runWalkThrough(t, block, base)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("run %d: statuses %v, the doc shows %v", run, got, want)
		}
	}
}

// docCall is the walk-through's call(); the test's own also logs each
// status to $WALK_STATUSES, so that a call whose answer a capture takes
// ($(call ...)) is counted too.
const (
	docCall  = `call() { curl -s -w '\n%{http_code}\n' "$@"; }`
	testCall = `call() { local out; out=$(curl -s -w '\n%{http_code}' "$@"); printf '%s\n' "$out"; ` +
		`printf '%s\n' "${out##*$'\n'}" >> "$WALK_STATUSES"; }`
	docAPI = "API=http://127.0.0.1:8080/api/v1"
)

var (
	callStep   = regexp.MustCompile(`^call |\$\(call `)
	statusNote = regexp.MustCompile(`#\s*(\d{3})\b`)
)

// walkThrough returns the shell block under "Walk through it with curl"
// and the status each of its calls is documented with: the first "# NNN"
// from the call's line up to the next call.
func walkThrough(t *testing.T) (string, []string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "## Walk through it with curl")
	_, rest, _ = strings.Cut(rest, "```sh\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok || !strings.Contains(block, docCall) || !strings.Contains(block, docAPI) {
		t.Fatalf("no walk-through block with %q and %q in docs/getting-started.md", docCall, docAPI)
	}
	var want []string
	pending := false
	for _, line := range strings.Split(block, "\n") {
		if callStep.MatchString(strings.TrimSpace(line)) {
			if pending {
				t.Fatalf("a call before %q shows no status", line)
			}
			pending = true
		}
		if m := statusNote.FindStringSubmatch(line); m != nil && pending {
			want, pending = append(want, m[1]), false
		}
	}
	if pending || len(want) < 10 {
		t.Fatalf("statuses %v: every call of the walk-through must show its status", want)
	}
	return block, want
}

// runWalkThrough runs block against base with bash and returns the
// status of each call, in order.
func runWalkThrough(t *testing.T, block, base string) []string {
	t.Helper()
	statuses := filepath.Join(t.TempDir(), "statuses")
	script := strings.Replace(strings.Replace(block, docCall, testCall, 1), docAPI, "API="+base+"/api/v1", 1)
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
	cmd.Env = append(os.Environ(), "WALK_STATUSES="+statuses)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("walk-through: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(statuses)
	if err != nil {
		t.Fatalf("no status logged: %v\n%s", err, out.String())
	}
	return strings.Fields(string(b))
}

// serveDemo seeds the demo, runs `shop serve` on a free loopback port
// until the test ends, and returns its base URL once it is ready.
func serveDemo(t *testing.T) string {
	t.Helper()
	_, env, shop := onTestStores(t)
	if out, err := shop("seed", "demo"); err != nil {
		t.Fatalf("seed demo: %v %s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	env["SHOP_ADDR"] = addr
	// Off: the wait for the writer polls, and a loaded host may poll long
	// enough to spend the per-IP window that make run's default keeps.
	env["SHOP_RATE_LIMIT"] = "0"
	ctx, cancel := context.WithCancel(context.Background())
	var logs bytes.Buffer
	var serveErr error
	stopped := make(chan struct{})
	go func() {
		serveErr = run(ctx, []string{"serve"}, func(k string) string { return env[k] }, &logs, &logs)
		close(stopped)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		if serveErr != nil {
			t.Errorf("serve: %v", serveErr)
		}
	})
	base := "http://" + addr
	for {
		select {
		case <-stopped:
			t.Fatalf("serve ended: %v\n%s", serveErr, logs.String())
		case <-time.After(50 * time.Millisecond): // pacing the polls, not a deadline
		}
		if res, err := http.Get(base + "/readyz"); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return base
			}
		}
	}
}
