package auth

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/racetest"
	"github.com/shop-oss/shop/internal/testenv"
)

// newThrottledHarness is newHarness with a budget of failures failed
// logins per email in any window.
func newThrottledHarness(t *testing.T, failures int, window time.Duration) *harness {
	t.Helper()
	r := testenv.NewRedis(t)
	return newHarnessLimited(t, testenv.NewDatabase(t).Pool, r.Client, r.Prefix, 1_000_000, func(c *Config) {
		c.LoginFailures, c.LoginWindow = failures, window
	})
}

func (h *harness) tryLogin(t *testing.T, email, password string) result {
	t.Helper()
	return h.do(t, http.MethodPost, "/api/v1/auth/login", map[string]string{"email": email, "password": password})
}

// retryAfter checks a 429's Retry-After and returns it.
func retryAfter(t *testing.T, r result, window time.Duration) int {
	t.Helper()
	r.want(t, http.StatusTooManyRequests, "rate_limited")
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > int(window/time.Second)+1 {
		t.Fatalf("Retry-After = %q, want whole seconds within the window", r.header.Get("Retry-After"))
	}
	return secs
}

// Once an email has spent its failure budget, every login for it answers
// 429 (the right password too), unknown emails alike and with the same
// answer; other accounts and successful logins are not affected.
func TestLoginThrottlePerAccount(t *testing.T) {
	t.Parallel()
	h := newThrottledHarness(t, 3, time.Minute)
	h.mustCreate(t, "ada@example.com", RoleShopper)
	h.mustCreate(t, "bob@example.com", RoleShopper)
	for range 5 { // successes spend nothing
		h.login(t, "bob@example.com", "")
	}
	for _, email := range []string{"ada@example.com", "nobody@example.com"} {
		for range 3 {
			h.tryLogin(t, email, "wrong password").want(t, http.StatusUnauthorized, "invalid_credentials")
		}
	}
	known := h.tryLogin(t, "ada@example.com", "wrong password")
	unknown := h.tryLogin(t, "nobody@example.com", "wrong password")
	retryAfter(t, known, time.Minute)
	retryAfter(t, unknown, time.Minute)
	if detail(t, known) != detail(t, unknown) {
		t.Errorf("a throttled known and unknown email answer differently: %s vs %s", known.body, unknown.body)
	}
	// The owner too, in any spelling of the address.
	retryAfter(t, h.tryLogin(t, "  ADA@example.com", testPassword), time.Minute)
	h.login(t, "bob@example.com", "")
	if m := metricsText(t, h); !strings.Contains(m, `shop_auth_logins_total{outcome="throttled"} 3`) {
		t.Errorf("/metrics lacks 3 throttled logins")
	}
}

// Twenty wrong passwords released together: exactly the budget is checked
// (and answered 401), the rest get 429.
func TestLoginThrottleHoldsUnderABurst(t *testing.T) {
	t.Parallel()
	h := newThrottledHarness(t, 3, time.Minute)
	h.mustCreate(t, "ada@example.com", RoleShopper)
	var mu sync.Mutex
	got := map[int]int{}
	racetest.Together(racetest.Times(20, func(int) {
		r := h.tryLogin(t, "ada@example.com", "wrong password")
		mu.Lock()
		got[r.status]++
		mu.Unlock()
	})...)
	if got[http.StatusUnauthorized] != 3 || got[http.StatusTooManyRequests] != 17 {
		t.Fatalf("answers %v, want 3 × 401 and 17 × 429", got)
	}
}

// The owner is slowed, never locked out: once the failures leave the
// sliding window, the right password logs in.
func TestLoginThrottleWindowSlides(t *testing.T) {
	t.Parallel()
	// Wide enough that two failed logins and the third attempt fit in it
	// with other tests on the same cores: each is an argon2 hash under the
	// race detector, and at go test -parallel 8 three of them took over 3 s.
	const window = 10 * time.Second
	h := newThrottledHarness(t, 2, window)
	h.mustCreate(t, "ada@example.com", RoleShopper)
	for range 2 {
		h.tryLogin(t, "ada@example.com", "wrong password").want(t, http.StatusUnauthorized, "invalid_credentials")
	}
	retryAfter(t, h.tryLogin(t, "ada@example.com", testPassword), window)
	deadline := time.Now().Add(30 * time.Second) // generous on a loaded machine
	for {
		time.Sleep(200 * time.Millisecond)
		r := h.tryLogin(t, "ada@example.com", testPassword)
		if r.status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d long after the window slid: %s", r.status, r.body)
		}
	}
}
