package testenv

import (
	"encoding/json"
	"maps"
	"net/http"
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
	// it exits, and another port is tried. Meanwhile the port answers
	// for whatever took it (a test's Redis resets an HTTP request), so
	// stripe-mock counts as up only once a Stripe request is answered
	// as stripe-mock answers it, and it is still running.
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
		if answers(addr, exited) {
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
			return "http://" + addr
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Fatal("stripe-mock did not start on any of five ports")
	return ""
}

// answers tells whether the stripe-mock at addr answers a list of
// customers, as stripe-mock does, and has not exited; false once it
// exits, or after 20 s.
func answers(addr string, exited <-chan struct{}) bool {
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return false
		case <-time.After(50 * time.Millisecond):
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/customers", nil)
		req.Header.Set("Authorization", "Bearer sk_test_123")
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		var list struct {
			Object string `json:"object"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || list.Object != "list" {
			return false // another server holds the port
		}
		select {
		case <-exited:
			return false
		default:
			return true
		}
	}
	return false
}
