package auth

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

func issueFor(t *testing.T, tc *tokenCodec, now time.Time) string {
	t.Helper()
	u := User{ID: uuid.NewString(), Role: RoleShopper}
	s, err := tc.issue(u, uuid.NewString(), uuid.NewString(), now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestVerifiedTokenStillExpires: a token served from the cache is refused
// once it expires, exactly as an uncached one.
func TestVerifiedTokenStillExpires(t *testing.T) {
	tc := newTokenCodec(testSecret, time.Minute)
	start := time.Now()
	tc.now = func() time.Time { return start }
	header := "Bearer " + issueFor(t, tc, start)
	first, err := tc.parseBearer(header)
	if err != nil {
		t.Fatal(err)
	}
	again, err := tc.parseBearer(header)
	if err != nil || again != first {
		t.Fatalf("second check: %v (same claims: %v), want the cached claims", err, again == first)
	}
	tc.now = func() time.Time { return start.Add(time.Minute + leeway - time.Second) }
	if _, err := tc.parseBearer(header); err != nil {
		t.Fatalf("within the leeway: %v", err)
	}
	tc.now = func() time.Time { return start.Add(time.Minute + leeway + time.Second) }
	if _, err := tc.parseBearer(header); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("after expiry: err = %v, want unauthorized: expired", err)
	}
}

// TestVerifiedCacheOnlyHoldsGoodTokens: forged, tampered and wrongly keyed
// tokens are refused every time and never remembered; a token differing
// from a good one in a single byte of its signature is not a hit.
func TestVerifiedCacheOnlyHoldsGoodTokens(t *testing.T) {
	tc := newTokenCodec(testSecret, time.Minute)
	good := issueFor(t, tc, time.Now())
	if _, err := tc.parseBearer("Bearer " + good); err != nil {
		t.Fatal(err)
	}
	other := issueFor(t, newTokenCodec([]byte("another secret, another service"), time.Minute), time.Now())
	last := good[len(good)-1:]
	flipped := good[:len(good)-1] + map[bool]string{true: "A", false: "B"}[last != "A"]
	for _, bad := range []string{other, flipped, good + "x"} {
		for range 2 {
			if _, err := tc.parseBearer("Bearer " + bad); !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("%s…: err = %v, want unauthorized", bad[:20], err)
			}
		}
	}
	if n := tc.verified.len(); n != 1 {
		t.Errorf("cache holds %d tokens, want only the good one", n)
	}
}

// TestVerifiedCacheIsBounded: it never holds more than two generations.
func TestVerifiedCacheIsBounded(t *testing.T) {
	c := newVerifiedCache(10)
	for i := range 35 {
		c.put(fmt.Sprintf("token-%d", i), &accessClaims{})
	}
	if n := c.len(); n > 20 || n < 10 {
		t.Errorf("cache holds %d, want 10 to 20", n)
	}
	if _, ok := c.get("token-34", time.Now()); ok {
		t.Error("claims without an expiry were returned")
	}
}

// TestVerifiedCacheCopiesTokens: the token string handed to put may point
// into a request buffer that the HTTP server reuses (Fiber's c.Get does);
// the cache must keep its own copy.
func TestVerifiedCacheCopiesTokens(t *testing.T) {
	c := newVerifiedCache(10)
	cl := &accessClaims{}
	cl.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Minute))
	buf := []byte("token-one")
	c.put(unsafe.String(&buf[0], len(buf)), cl)
	copy(buf, "token-two")
	if _, ok := c.get("token-one", time.Now()); !ok {
		t.Error("the token was lost when the caller's buffer was reused")
	}
	if _, ok := c.get("token-two", time.Now()); ok {
		t.Error("a token never verified is a hit")
	}
}
