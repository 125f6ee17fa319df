// Package roomkey names a waiting room's Redis keys. The room writes
// them; the purchase scripts read its pass hash (order's lines.lua), so
// both take the names from here. Formats in docs/design/room.md.
package roomkey

import (
	"strconv"

	"github.com/shop-oss/shop/internal/inventory"
)

// Keys names a room's Redis keys. Each SKU's are its sale hash's name and
// a suffix, so they share the sale's hash tag (one slot on a cluster, with
// the keys the purchase scripts take).
type Keys struct{ stock *inventory.Stock }

// New returns the room keys of stock's SKUs.
func New(stock *inventory.Stock) Keys { return Keys{stock: stock} }

// Passes is sku's pass hash: user id -> "round pass expires_ms
// admitted_ms", one field per admitted shopper of the live room (a
// field of an older round's is dead: its round no longer matches). The
// purchase scripts read it (order's lines.lua); only the admitter writes it.
func (k Keys) Passes(sku string) string { return k.stock.SaleKey(sku) + ":room:passes" }

// prefix is the prefix of round's own keys for sku.
func (k Keys) prefix(sku string, round int64) string {
	return k.stock.SaleKey(sku) + ":room:" + strconv.FormatInt(round, 10)
}

// State is the room's counters for round: admitted, the token bucket
// (tokens, last_ms), the late joiners' sequence, and, from the shuffle,
// early_entries and early_sha.
func (k Keys) State(sku string, round int64) string { return k.prefix(sku, round) }

// Early holds those who joined before starts_at: every score 0, so the
// order is the members' bytes: SHA-256(seed ":" entry_id), then the user
// id's 16 bytes, then the join time (6 bytes, ms, big-endian).
func (k Keys) Early(sku string, round int64) string { return k.prefix(sku, round) + ":early" }

// Joined lists the early entries in order of joining, one element each:
// the early member without its first 32 bytes (the user id's 16 bytes,
// then the join time). The entry list shows it before the shuffle, when
// the early set's order is the secret one.
func (k Keys) Joined(sku string, round int64) string { return k.prefix(sku, round) + ":joined" }

// Late holds those who joined from starts_at on: member the user id's 16
// bytes, score join_ms*1024 + a sequence within the ms (arrival order).
func (k Keys) Late(sku string, round int64) string { return k.prefix(sku, round) + ":late" }

// Challenge is an issued challenge's key: its value "round user_id", the
// round and the shopper it was issued to (challenge.lua), gone after 2
// minutes or once presented.
func (k Keys) Challenge(sku, challenge string) string {
	return k.stock.SaleKey(sku) + ":room:challenge:" + challenge
}

// Admissions is round's admission log: one "admitted_after ms" per turn
// that admitted anyone.
func (k Keys) Admissions(sku string, round int64) string { return k.prefix(sku, round) + ":admits" }
