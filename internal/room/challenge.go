package room

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
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
