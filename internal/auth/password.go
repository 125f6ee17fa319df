package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shop-oss/shop/internal/apperr"
	"golang.org/x/crypto/argon2"
)

// argon2id parameters: OWASP's minimum (19 MiB, 2 passes, 1 lane). Stored
// hashes carry their own parameters (PHC string format), so raising these
// later keeps old hashes verifiable.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// Bounds on the parameters of a stored hash, so a corrupt or hostile row
// cannot make one verification allocate gigabytes or spin for minutes.
const (
	maxArgonMemoryKiB = 256 * 1024
	maxArgonTime      = 16
	maxArgonThreads   = 8
)

// hashWait is how long a request waits for a free hashing slot before it is
// answered 503: a login queue longer than that is an overload, not traffic.
const hashWait = 5 * time.Second

// dummyHash is verified against when a login names an unknown email, so the
// answer takes as long as for a known one and timing does not tell which
// emails have accounts. Its key matches no password anyone knows.
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$c2hvcC1kdW1teS1zYWx0IQ$ZHVtbXkga2V5LCBtYXRjaGVzIG5vIHBhc3N3b3JkISE"

var errMalformedHash = errors.New("auth: malformed password hash")

var b64 = base64.RawStdEncoding

// hashCost is the memory and passes of new hashes.
type hashCost struct{ memoryKiB, time uint32 }

var (
	// owaspCost is the production cost.
	owaspCost = hashCost{argonMemoryKiB, argonTime}
	// fastCost is for development and load tests only (Config.FastHashing),
	// where thousands of test shoppers must log in within seconds.
	fastCost = hashCost{1024, 1}
)

// hashPassword returns the PHC string of an argon2id hash of password with a
// fresh random salt, at the production cost.
func hashPassword(password string) (string, error) { return hashPasswordAt(owaspCost, password) }

func hashPasswordAt(c hashCost, password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, c.time, c.memoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, c.memoryKiB, c.time, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// verifyPassword reports whether password matches the PHC string encoded,
// comparing in constant time. It returns errMalformedHash for a string it
// cannot parse or whose parameters are out of bounds.
func verifyPassword(encoded, password string) (bool, error) {
	p, err := parsePHC(encoded)
	if err != nil {
		return false, err
	}
	key := argon2.IDKey([]byte(password), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(key, p.key) == 1, nil
}

type phc struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

// parsePHC reads "$argon2id$v=19$m=...,t=...,p=...$salt$key".
func parsePHC(s string) (phc, error) {
	var p phc
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return p, errMalformedHash
	}
	var threads uint32
	if n, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &threads); err != nil || n != 3 ||
		fmt.Sprintf("m=%d,t=%d,p=%d", p.memory, p.time, threads) != parts[3] {
		return p, errMalformedHash
	}
	if p.memory < 8*threads || p.memory > maxArgonMemoryKiB || p.time < 1 || p.time > maxArgonTime ||
		threads < 1 || threads > maxArgonThreads {
		return p, errMalformedHash
	}
	p.threads = uint8(threads)
	var err error
	if p.salt, err = b64.DecodeString(parts[4]); err != nil || len(p.salt) < 8 {
		return p, errMalformedHash
	}
	if p.key, err = b64.DecodeString(parts[5]); err != nil || len(p.key) < 16 || len(p.key) > 64 {
		return p, errMalformedHash
	}
	return p, nil
}

// withHashSlot runs f once a hashing slot is free. It returns an
// apperr.Unavailable error when none frees up within hashWait (or ctx ends).
func (s *Service) withHashSlot(ctx context.Context, f func() error) error {
	wait, cancel := context.WithTimeout(ctx, hashWait)
	defer cancel()
	select {
	case s.hashSlots <- struct{}{}:
	case <-wait.Done():
		return fmt.Errorf("wait for a hashing slot: %w: %w", apperr.Unavailable("too many logins at once; retry shortly"), wait.Err())
	}
	defer func() { <-s.hashSlots }()
	return f()
}
