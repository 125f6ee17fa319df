package room

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed challenge.lua
	challengeLua    string
	challengeScript = redis.NewScript(challengeLua)
)

// ChallengeTTL is how long a challenge may be presented (docs/api.md).
const ChallengeTTL = 2 * time.Minute

// Challenge is a proof-of-work challenge issued to one shopper.
type Challenge struct {
	Challenge string    `json:"challenge"`
	Bits      int       `json:"bits"`
	ExpiresAt time.Time `json:"expires_at"`
}

// IssueChallenge makes a challenge for user to join the room of sku's
// live round with: usable once, by user, in that round only, for
// ChallengeTTL. Errors: ErrNoRoom, ErrSaleNotActive (the round ended: no
// join could use it), or a 503.
func (s *Service) IssueChallenge(ctx context.Context, sku, user string) (Challenge, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return Challenge{}, fmt.Errorf("challenge: %w", err)
	}
	c := Challenge{Challenge: hex.EncodeToString(b), ExpiresAt: time.Now().Add(ChallengeTTL).UTC().Truncate(time.Second)}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	keys := []string{s.stock.SaleKey(sku), s.keys.Challenge(sku, c.Challenge)}
	reply, err := challengeScript.Run(ctx, s.rdb, keys, user, ChallengeTTL.Milliseconds()).StringSlice()
	if err != nil {
		return Challenge{}, storeError("challenge", err)
	}
	switch {
	case reply[0] == "no_room":
		return Challenge{}, ErrNoRoom
	case reply[0] == "ended":
		return Challenge{}, ErrSaleNotActive
	case reply[0] != "ok" || len(reply) != 2:
		return Challenge{}, fmt.Errorf("waiting room: challenge answered %q", reply)
	}
	if c.Bits, err = strconv.Atoi(reply[1]); err != nil {
		return Challenge{}, fmt.Errorf("waiting room: challenge answered %q", reply)
	}
	return c, nil
}

// validChallenge tells whether c has the form of an issued challenge
// (32 hex digits), so no other string names a key.
func validChallenge(c string) bool {
	if len(c) != 32 {
		return false
	}
	_, err := hex.DecodeString(c)
	return err == nil
}

// ValidNonce tells whether n is 1 to 64 visible ASCII characters.
func ValidNonce(n string) bool {
	if len(n) < 1 || len(n) > 64 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] <= ' ' || n[i] > '~' {
			return false
		}
	}
	return true
}

// Solves tells whether nonce answers challenge at difficulty n: the
// SHA-256 of challenge ":" nonce starts with n zero bits (docs/api.md).
func Solves(challenge, nonce string, n int) bool {
	if !ValidNonce(nonce) {
		return false
	}
	return LeadingZeroBits(sha256.Sum256([]byte(challenge+":"+nonce))) >= n
}

// LeadingZeroBits counts the zero bits a digest starts with.
func LeadingZeroBits(d [32]byte) int {
	n := 0
	for _, b := range d {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// Solve finds a nonce for challenge at difficulty n (the load test's
// shoppers, and tests): about 2^n hashes.
func Solve(challenge string, n int) string {
	for i := uint64(0); ; i++ {
		nonce := strconv.FormatUint(i, 36)
		if Solves(challenge, nonce, n) {
			return nonce
		}
	}
}
