package auth

import (
	"strings"
	"sync"
	"time"
)

// verifiedSize is how many tokens each generation of the cache holds: a
// few MB, enough for the shoppers active in a flash sale on one instance.
const verifiedSize = 8192

// verifiedCache remembers access tokens whose signature and claims were
// verified, so that a client reusing its token (every client does, for
// the token's lifetime) is not verified again on every request: decoding
// and checking the JWT was about a tenth of a purchase's server CPU
// (BENCHMARKS.md). It is safe because the key is the whole token,
// signature included, so only a byte-identical copy of a token we checked
// hits; expiry is checked again on every hit; and revocation never relied
// on this check, it is the session lookup's job, which still runs on every
// request.
//
// Two generations bound its memory without per-entry bookkeeping: when the
// current one is full it becomes the previous one and the oldest is
// dropped; a token found only there is verified again when it ages out.
type verifiedCache struct {
	mu        sync.RWMutex
	size      int
	cur, prev map[string]*accessClaims
}

func newVerifiedCache(size int) *verifiedCache {
	return &verifiedCache{size: size, cur: make(map[string]*accessClaims, size)}
}

// get returns the claims of token if it was verified and is still within
// its expiry (plus leeway) at now. The claims are shared: read only.
func (c *verifiedCache) get(token string, now time.Time) (*accessClaims, bool) {
	c.mu.RLock()
	cl, ok := c.cur[token]
	if !ok {
		cl, ok = c.prev[token]
	}
	c.mu.RUnlock()
	if !ok || cl.ExpiresAt == nil || now.After(cl.ExpiresAt.Add(leeway)) {
		return nil, false
	}
	return cl, true
}

// put records a verified token. The token is copied: it usually points
// into the HTTP server's request buffer, which is reused.
func (c *verifiedCache) put(token string, cl *accessClaims) {
	token = strings.Clone(token)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) >= c.size {
		c.prev, c.cur = c.cur, make(map[string]*accessClaims, c.size)
	}
	c.cur[token] = cl
}

// len is the number of tokens held (for tests).
func (c *verifiedCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.cur) + len(c.prev)
}
