package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// loadtestReport is the part of `shop loadtest --json` checked here.
type loadtestReport struct {
	OK     bool   `json:"ok"`
	SKU    string `json:"sku"`
	Attack struct {
		StoppedBy string         `json:"stopped_by"`
		Accepted  int            `json:"accepted"`
		Requests  int            `json:"requests"`
		Outcomes  map[string]int `json:"outcomes"`
	} `json:"attack"`
	Stock struct {
		Available int64 `json:"available"`
		Sold      int64 `json:"sold"`
		Confirmed int64 `json:"confirmed"`
		Paid      int64 `json:"paid"`
		Released  int64 `json:"released"`
	} `json:"stock"`
	Lifecycle *struct {
		Payers        int   `json:"payers"`
		Paid          int   `json:"paid"`
		Late          int   `json:"late"`
		Expiring      int   `json:"expiring"`
		Expired       int   `json:"expired"`
		ReleasedUnits int64 `json:"released_units"`
		Released      bool  `json:"released"`
	} `json:"lifecycle"`
	Invariants []struct {
		Name    string `json:"name"`
		OK      bool   `json:"ok"`
		Skipped bool   `json:"skipped"`
		Detail  string `json:"detail"`
	} `json:"invariants"`
}

// runLoadtest runs `shop loadtest --json` against s with a fresh admin,
// giving it the server's stores so that I1–I7 are judged on them.
func runLoadtest(t *testing.T, e env, s *server, args ...string) (loadtestReport, string, error) {
	t.Helper()
	base := []string{"loadtest", "--target", s.URL, "--json", "--admin-email", "lt-admin@example.com",
		"--admin-password", "correct horse", "--users", "20", "--connections", "20", "--duration", "10s",
		"--redis-url", e["SHOP_REDIS_URL"], "--database-url", e["SHOP_DATABASE_URL"], "--key-prefix", e["SHOP_KEY_PREFIX"]}
	stdout, stderr, err := runShop(t, e, append(base, args...)...)
	var r loadtestReport
	if jerr := json.Unmarshal([]byte(stdout), &r); jerr != nil {
		t.Fatalf("loadtest output is not a JSON report: %v (err %v)\nstdout: %s\nstderr: %s", jerr, err, stdout, stderr)
	}
	return r, stderr, err
}

// payRatioLoadtest serves e with a payment TTL of 5s and runs a loadtest
// (args first) in which 20 buyers of one unit each, 10 units, half of
// those who got one pay: the invariants hold, the unpaid orders expire and
// their units are released once, and the stock adds up.
func payRatioLoadtest(t *testing.T, e env, args ...string) loadtestReport {
	t.Helper()
	e["SHOP_PAYMENT_TTL"] = "5s"
	addAdmin(t, e)
	s := startServer(t, e)
	r, stderr, err := runLoadtest(t, e, s, append(args, "--users", "20", "--units", "10", "--per-user-limit", "1", "--pay-ratio", "0.5")...)
	if err != nil {
		t.Fatalf("loadtest failed: %v\n%s", err, stderr)
	}
	for _, inv := range r.Invariants {
		if !inv.OK || inv.Skipped {
			t.Errorf("%+v", inv)
		}
	}
	lc := r.Lifecycle
	if lc == nil || lc.Payers != 5 || lc.Paid == 0 || lc.Paid+lc.Late != 5 || lc.Expiring != 10-lc.Paid ||
		lc.Expired != lc.Expiring || lc.ReleasedUnits != int64(lc.Expiring) || !lc.Released {
		t.Fatalf("lifecycle %+v", lc)
	}
	if paid := int64(lc.Paid); r.Stock.Available != 10-paid || r.Stock.Paid != paid || r.Stock.Released != 10-paid || r.Stock.Confirmed != 10 {
		t.Errorf("stock %+v", r.Stock)
	}
	return r
}

func addAdmin(t *testing.T, e env) {
	t.Helper()
	if _, stderr, err := runShop(t, e, "user", "add", "--email", "lt-admin@example.com", "--password", "correct horse", "--role", "admin"); err != nil {
		t.Fatalf("user add: %v %s", err, stderr)
	}
}

// TestLoadtest: a flash sale through the built binary, once limited by the
// per-user limit (20 shoppers × 2 < 50 units) and once by stock (10 × 6 >
// 50): the attack ends by itself, the invariants hold, every unit sold is
// confirmed.
func TestLoadtest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addAdmin(t, e)
	s := startServer(t, e)
	tests := []struct {
		name         string
		users, limit string
		accepted     int
		stoppedBy    string
	}{
		{"limit_bound", "20", "2", 40, "all_at_limit"},
		{"stock_bound", "10", "6", 50, "sold_out"},
	}
	for _, tc := range tests {
		log := filepath.Join(t.TempDir(), "accepted")
		r, stderr, err := runLoadtest(t, e, s, "--users", tc.users, "--units", "50", "--per-user-limit", tc.limit, "--accepted-out", log)
		if err != nil {
			t.Fatalf("%s: loadtest failed: %v\n%s", tc.name, err, stderr)
		}
		// Its log of 202s: every accepted order is in a store, none lost.
		out, stderr, err := runShop(t, e, "recover", "--accepted", log)
		if err != nil || !strings.Contains(out, fmt.Sprintf("%d accepted orders checked, 0 lost", tc.accepted)) {
			t.Errorf("%s: recover --accepted: %v\n%s%s", tc.name, err, out, stderr)
		}
		if !r.OK || len(r.Invariants) != 14 {
			t.Errorf("%s: report not OK: %+v", tc.name, r.Invariants)
		}
		for _, inv := range r.Invariants[:7] {
			if !strings.HasPrefix(inv.Name, "I") || inv.Skipped {
				t.Errorf("%s: %+v, want I1–I7 checked on the stores", tc.name, inv)
			}
		}
		if r.Attack.Accepted != tc.accepted || r.Stock.Sold != int64(tc.accepted) || r.Stock.Confirmed != int64(tc.accepted) ||
			r.Attack.StoppedBy != tc.stoppedBy {
			t.Errorf("%s: accepted %d sold %d confirmed %d stopped by %s; want %d, %s",
				tc.name, r.Attack.Accepted, r.Stock.Sold, r.Stock.Confirmed, r.Attack.StoppedBy, tc.accepted, tc.stoppedBy)
		}
		if r.Attack.Outcomes["202 accepted"] != tc.accepted {
			t.Errorf("%s: outcomes %v", tc.name, r.Attack.Outcomes)
		}
	}
}

// TestLoadtestForwardedFor: against a server that limits each client to 50
// requests in 10 s and trusts this host as a proxy, as `make run` does,
// --forwarded-for gives every request of 40 shoppers (80 sign-ups and
// logins alone) their own addresses, and the admin's its own: nothing is
// refused with 429. Without it the run fails on the limit and deletes the
// product it made, which leaves the catalog.
func TestLoadtestForwardedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e["SHOP_RATE_LIMIT"] = "50/10s"
	e["SHOP_TRUSTED_PROXIES"] = "127.0.0.1"
	addAdmin(t, e)
	s := startServer(t, e)
	r, stderr, err := runLoadtest(t, e, s, "--users", "40", "--units", "40", "--per-user-limit", "1", "--forwarded-for")
	if err != nil {
		t.Fatalf("loadtest --forwarded-for failed: %v\n%s", err, stderr)
	}
	if !r.OK || r.Attack.Accepted != 40 {
		t.Errorf("report OK %v, accepted %d, want 40: %+v", r.OK, r.Attack.Accepted, r.Invariants)
	}
	for outcome, n := range r.Attack.Outcomes {
		if strings.HasPrefix(outcome, "429") {
			t.Errorf("%d purchases answered %s", n, outcome)
		}
	}

	_, stderr, err = runShop(t, e, "loadtest", "--target", s.URL, "--json", "--admin-email", "lt-admin@example.com",
		"--admin-password", "correct horse", "--users", "40", "--units", "40")
	if err == nil || !strings.Contains(stderr, "429") || !strings.Contains(stderr, "was deleted") {
		t.Fatalf("loadtest without --forwarded-for: %v, want a 429 and its product deleted\n%s", err, stderr)
	}
	var page struct {
		Items []struct{ SKU string } `json:"items"`
	}
	// From an address of its own: this host's window is spent.
	call(t, "GET", s.URL+"/api/v1/products?category=loadtest", nil, "X-Forwarded-For", "203.0.113.7").JSON(t, &page)
	if len(page.Items) != 1 || page.Items[0].SKU != r.SKU {
		t.Errorf("loadtest products %+v, want only the first run's %s", page.Items, r.SKU)
	}
}

// TestLoadtestPayRatio: against a server with a 5 s payment window, half
// the winners of a sold-out sale pay and the other half let their orders
// expire (a payer whose window closed first on a loaded machine is
// counted too late, and its order expires with them); the run waits for the server's sweep, the units come back once
// each, I1–I7 hold on the stores, and `shop audit` agrees (exit 0). A unit
// added to the live stock behind the shop's back then makes the audit
// exit 1, naming the SKU.
func TestLoadtestPayRatio(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := payRatioLoadtest(t, e)
	if out, stderr, err := runShop(t, e, "audit"); err != nil || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("audit after the sale: %v\n%s\n%s", err, out, stderr)
	}
	opts, err := redis.ParseURL(e["SHOP_REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.HIncrBy(context.Background(), e["SHOP_KEY_PREFIX"]+"sale:{"+r.SKU+"}", "available", 1).Err(); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runShop(t, e, "audit")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, r.SKU) || strings.Contains(out, `"ok": true`) {
		t.Fatalf("audit after a unit from nowhere: %v\n%s\n%s", err, out, stderr)
	}
}

// TestLoadtestFailsWithoutWriter: with no order writer nothing is
// confirmed, so the invariant fails and the command exits non-zero with
// one line saying which.
func TestLoadtestFailsWithoutWriter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addAdmin(t, e)
	s := startServer(t, e, "--writer=false")
	r, stderr, err := runLoadtest(t, e, s, "--users", "5", "--units", "5", "--per-user-limit", "1", "--drain-timeout", "1s", "--sample", "2")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("err = %v, want a non-zero exit", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "invariant failed") || !strings.Contains(last, "confirmed once") ||
		!strings.Contains(last, "I2 every accepted order persisted (accepted but not in PostgreSQL") ||
		!strings.Contains(last, "I5 stream drained (in the stream, neither written nor dead-lettered") {
		t.Errorf("stderr = %q, want one line naming the confirmation invariants", stderr)
	}
	if r.OK || r.Stock.Sold != 5 || r.Stock.Confirmed != 0 {
		t.Errorf("report: ok %v sold %d confirmed %d", r.OK, r.Stock.Sold, r.Stock.Confirmed)
	}
}

// TestLoadtestRefusesRemoteTargets: a target outside loopback is refused
// before anything is sent (192.0.2.0/24 is reserved for documentation).
func TestLoadtestRefusesRemoteTargets(t *testing.T) {
	t.Parallel()
	_, stderr, err := runShop(t, env{}, "loadtest", "--target", "http://192.0.2.1:8080",
		"--admin-email", "a@example.com", "--admin-password", "correct horse")
	if err == nil || !strings.Contains(stderr, "not a loopback address") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("err = %v, stderr = %q; want one line refusing the target", err, stderr)
	}
}
