package testenv

import (
	"encoding/json"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// envStripeMock names the stripe-mock binary scripts/test.sh builds
// (github.com/stripe/stripe-mock, Stripe's own mock of its API);
// envStripeFixtures its bundled fixtures (its answers), which
// StripeMockWith changes.
const (
	envStripeMock     = "SHOP_TEST_STRIPE_MOCK"
	envStripeFixtures = "SHOP_TEST_STRIPE_FIXTURES"
)

// StripeMockWith is StripeMock answering with the bundled fixtures
// changed by set: resource name to the fields it sets (e.g.
// "payment_intent": {"status": "succeeded"}, which the bundled ones
// answer "requires_payment_method").
func StripeMockWith(t testing.TB, set map[string]map[string]any) string {
	t.Helper()
	src := os.Getenv(envStripeFixtures)
	if src == "" {
		need(t, "stripe-mock fixtures", envStripeFixtures, "", nil)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("read stripe-mock fixtures: %v", err)
	}
	var f struct {
		Resources map[string]map[string]any `json:"resources"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("read stripe-mock fixtures %s: %v", src, err)
	}
	for name, fields := range set {
		if f.Resources[name] == nil {
			t.Fatalf("stripe-mock fixtures have no %q", name)
		}
		maps.Copy(f.Resources[name], fields)
	}
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fixtures.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return StripeMock(t, path)
}

// StripeMock starts a stripe-mock private to t on a free port, with the
// fixtures file when one is given (its answers in place of the bundled
// ones), and returns its URL; it is killed when t ends. Without the
// binary (SHOP_TEST_STRIPE_MOCK, or stripe-mock on PATH) t is skipped,
// or fails when CI is set.
func StripeMock(t testing.TB, fixtures ...string) string {
	t.Helper()
	bin := os.Getenv(envStripeMock)
	if bin == "" {
		bin, _ = exec.LookPath("stripe-mock")
	}
	switch {
	case bin == "" && os.Getenv("CI") != "":
		t.Fatalf("no stripe-mock: set %s (scripts/test.sh builds it; CI is set, so this fails instead of skipping)", envStripeMock)
	case bin == "":
		t.Skipf("no stripe-mock: set %s or put stripe-mock on PATH (scripts/test.sh builds it)", envStripeMock)
	}
	// The free port can be taken again before stripe-mock binds it: then
	// it exits, and another port is tried.
	for range 5 {
		addr := "127.0.0.1:" + freePort(t)
		// -http-addr alone still opens HTTPS on the fixed port 12112, so
		// a second mock would die on it: give HTTPS a port of its own.
		args := []string{"-http-addr", addr, "-https-addr", "127.0.0.1:0"}
		if len(fixtures) > 0 {
			args = append(args, "-fixtures", fixtures[0])
		}
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start stripe-mock: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if listening(addr, exited) {
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
			return "http://" + addr
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Fatal("stripe-mock did not start on any of five ports")
	return ""
}

// listening waits until addr accepts connections (true), or the process
// exits or 20 s pass (false): stripe-mock reads Stripe's whole OpenAPI
// spec before it listens.
func listening(addr string, exited <-chan struct{}) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return false
		case <-time.After(50 * time.Millisecond):
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return true
		}
	}
	return false
}
