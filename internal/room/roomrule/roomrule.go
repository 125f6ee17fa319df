// Package roomrule holds the waiting room's public rules (docs/api.md),
// those a client answers or checks on its own: the join challenge's
// proof of work, the early order a seed makes, and the bound a rate sets
// on admissions. The room and the load test's shoppers share them.
package roomrule

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
)

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
// SHA-256 of challenge ":" nonce starts with n zero bits.
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

// OrderKey is an early entry's place in the shuffle: the SHA-256 of
// seed ":" entry_id; early entries go in ascending order of it.
func OrderKey(seed, entryID string) [32]byte {
	return sha256.Sum256([]byte(seed + ":" + entryID))
}

// EarlyOrderSHA is the digest of the early entries' ids in admission
// order, each followed by "\n" (early_order_sha256).
func EarlyOrderSHA(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// RateBound says which span of whole seconds admitted more than rate x
// (T + 1) ("" when none did); perSecond counts admissions by second.
func RateBound(perSecond map[int64]int, rate int) string {
	secs := make([]int64, 0, len(perSecond))
	for s := range perSecond {
		secs = append(secs, s)
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
	for i := range secs {
		sum := 0
		for j := i; j < len(secs); j++ {
			sum += perSecond[secs[j]]
			if t := secs[j] - secs[i] + 1; sum > rate*int(t+1) {
				return fmt.Sprintf("%d admitted in the %d s from second %d at %d/s", sum, t, secs[i], rate)
			}
		}
	}
	return ""
}
