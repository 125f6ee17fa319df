// Package orderkey names order's Redis keys: each partition's stream,
// dead letters, due and owed sets, the saga's holds and logs, and every
// order's status hash, idempotency records and buyer's pending index.
// Order writes them; its writer, saga, ledger, audit and recovery read
// them by these names, so a key is spelled in one place. The partition
// count they are laid out by is settled once per prefix (partitions.go).
package orderkey

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/keyspace"
)

// Keys names the order keys under a prefix, partitioned as parts.
type Keys struct {
	prefix string
	parts  keyspace.Partitions
}

// New returns the names of the order keys under prefix.
func New(prefix string, parts keyspace.Partitions) Keys { return Keys{prefix: prefix, parts: parts} }

// Parts are the order partitions the keys are spread over.
func (k Keys) Parts() keyspace.Partitions { return k.parts }

// Partition is the name the keys of order partition p start with: the
// untagged "orders" of before partitions for partition 0 on a single
// Redis, else "orders:" and the partition's tag (the slot its SKUs share
// on a cluster).
func (k Keys) Partition(p int) string {
	if k.parts.Legacy(p) {
		return k.prefix + "orders"
	}
	return k.prefix + "orders:" + k.parts.Tag(p)
}

// Stream is partition p's order stream; Dead its dead letters; Due the
// orders with a payment window by due time.
func (k Keys) Stream(p int) string { return k.Partition(p) }
func (k Keys) Dead(p int) string   { return k.Partition(p) + ":dead" }
func (k Keys) Due(p int) string    { return k.Partition(p) + ":due" }

// Owed is partition p's set of spread orders whose releases may be owed
// (zset by when a sweeper may finish them, member the order id).
func (k Keys) Owed(p int) string { return k.Partition(p) + ":owed" }

// The keys of a saga's work in partition p (internal/order/saga), which
// an audit and a recovery read: Hold is the record of the lines a saga
// took there for order id, Holds indexes the holds by deadline; Settled
// is the log of the holds dropped because their order committed, each an
// entry {order_id, user, items} scored by when (Redis's ms), kept
// ledger.SettledRetention; Releases is a stream entry {order_id, skus}
// for each release there of an order homed elsewhere that gave units back.
func (k Keys) Hold(p int, id string) string { return k.Partition(p) + ":hold:" + id }
func (k Keys) Holds(p int) string           { return k.Partition(p) + ":holds" }
func (k Keys) Settled(p int) string         { return k.Partition(p) + ":settled" }
func (k Keys) Releases(p int) string        { return k.Partition(p) + ":releases" }

// Status is order id's status hash. On a cluster it carries the tag of the
// order's home partition, which the id names (keyspace's Stamp), so the
// status shares a slot with the home's stream, due set and SKUs; on a
// single Redis it keeps its old name.
func (k Keys) Status(id string) string {
	if k.parts.Grouped() {
		return k.prefix + "order:" + k.parts.Tag(k.parts.Home(id)) + id
	}
	return k.prefix + "order:" + id
}

// Pending is user's pending index: the orders not yet persisted, which
// the writer takes off it.
func (k Keys) Pending(user string) string {
	return k.prefix + "orders:pending:{" + user + "}"
}

// Idem is user's idempotency record for the client's key: any printable
// text up to 255 bytes becomes a short, safe key name.
func (k Keys) Idem(user, key string) string {
	sum := sha256.Sum256([]byte(key))
	return k.prefix + "idem:{" + user + "}:" + hex.EncodeToString(sum[:16])
}

// StatusPattern matches the status hash of an order of any partition: the
// part every partition's status names share (on a cluster they differ by
// their home's tag, which the id names), then anything. It may match
// other keys too; StatusID tells the status hashes apart.
func (k Keys) StatusPattern() string {
	var common string
	for p := range k.parts.Count() {
		id := k.parts.Stamp(uuid.UUID{}, p).String()
		pre := strings.TrimSuffix(k.Status(id), id)
		if p == 0 {
			common = pre
		}
		for !strings.HasPrefix(pre, common) {
			common = common[:len(common)-1]
		}
	}
	return common + "*"
}

// StatusID is the order id a status hash's key names (a key SCAN found
// with StatusPattern); ok is false for a key that names no order.
func (k Keys) StatusID(key string) (id string, ok bool) {
	// An order id is a UUID at the end of the name; the name must be the
	// one Status gives it, whatever tag it carries.
	const n = 36
	if len(key) < n {
		return "", false
	}
	u, err := uuid.Parse(key[len(key)-n:])
	if err != nil || k.Status(u.String()) != key {
		return "", false
	}
	return u.String(), true
}
