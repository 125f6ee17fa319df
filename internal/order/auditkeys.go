package order

import (
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/keyspace"
)

// StreamKeys are the order package's keys of one order partition that an
// audit or a recovery reads: the partition's stream and its group, its
// dead letters and due set, and (for every partition alike) the status
// hashes. Only AdvanceStream and RestoreStatuses write through them.
type StreamKeys struct {
	// Partition is the partition's number (keyspace.Partitions).
	Partition           int
	Stream, Group, Dead string
	Due                 string
	// On a cluster, the lines held in this partition for orders homed
	// elsewhere: Holds indexes the hold records (order ids), HoldPrefix
	// and an order id name one; Settled is the settled log of the holds
	// dropped because their order committed (zset of {order_id, user,
	// items} by when, kept SettledRetention).
	Holds, HoldPrefix, Settled string
	// Releases is the releases log: a stream entry {order_id, skus} for
	// each release here of an order homed elsewhere that gave units back.
	Releases string
	// StatusPattern matches every order status hash (for SCAN, on every
	// master of a cluster); StatusKey names one, StatusID reads one's name.
	StatusPattern string
	k             keys
}

// StatusKey is the key of order id's status hash.
func (k StreamKeys) StatusKey(id string) string { return k.k.status(id) }

// PendingKey is the key of user's pending index: the orders not yet
// persisted, which the writer takes them off.
func (k StreamKeys) PendingKey(user string) string { return k.k.pending(user) }

// StatusID is the order id a status hash's key names (a key SCAN found
// with StatusPattern); ok is false for a key that names no order.
func (k StreamKeys) StatusID(key string) (id string, ok bool) {
	// An order id is a UUID at the end of the name; the name must be the
	// one StatusKey gives it, whatever tag it carries.
	const n = 36
	if len(key) < n {
		return "", false
	}
	u, err := uuid.Parse(key[len(key)-n:])
	if err != nil || k.StatusKey(u.String()) != key {
		return "", false
	}
	return u.String(), true
}

// AuditKeys returns the keys under prefix of the one partition of a single
// Redis with the default layout (partition 0, the untagged stream).
func AuditKeys(prefix string) StreamKeys {
	return PartitionKeys(prefix, keyspace.Partitions{})[0]
}

// PartitionKeys returns the keys under prefix of every partition of parts,
// in partition order.
func PartitionKeys(prefix string, parts keyspace.Partitions) []StreamKeys {
	k := keys{prefix: prefix, parts: parts}
	out := make([]StreamKeys, parts.Count())
	pattern := k.statusPattern()
	for p := range out {
		out[p] = StreamKeys{Partition: p, Stream: k.stream(p), Group: group, Dead: k.dead(p), Due: k.due(p),
			Holds: k.holds(p), HoldPrefix: k.hold(p, ""), Settled: k.settled(p), Releases: k.releases(p), StatusPattern: pattern, k: k}
	}
	return out
}

// statusPattern matches the status hash of an order of any partition: the
// part every partition's status names share (on a cluster they differ by
// their home's tag, which the id names), then anything. It may match
// other keys too; StatusID tells the status hashes apart.
func (k keys) statusPattern() string {
	var common string
	for p := range k.parts.Count() {
		id := k.parts.Stamp(uuid.UUID{}, p).String()
		pre := strings.TrimSuffix(k.status(id), id)
		if p == 0 {
			common = pre
		}
		for !strings.HasPrefix(pre, common) {
			common = common[:len(common)-1]
		}
	}
	return common + "*"
}

// HomeOf is the home partition (where its events go) of order id with
// lines of skus, and whether that is certain. On a cluster the id names it
// (keyspace's Stamp). On a single Redis an order's home is its first
// line's partition as it was placed, which PostgreSQL does not keep (its
// lines are keyed by SKU), so only an order whose lines all fall in one
// partition is certain from its SKUs; the status hash knows the home of
// the others (StatusPartition). Else the answer is the partition of the
// first SKU given, a right home on a single Redis, where any partition's
// stream and due set reach the writers and sweepers.
func HomeOf(parts keyspace.Partitions, id string, skus []string) (home int, certain bool) {
	if parts.Grouped() {
		return parts.Home(id), true
	}
	if len(skus) == 0 {
		return 0, parts.Count() == 1
	}
	home = parts.Of(skus[0])
	for _, s := range skus[1:] {
		if parts.Of(s) != home {
			return home, false
		}
	}
	return home, true
}

// LiveStatus reads a status hash's status and creation time (Unix ms).
func LiveStatus(m map[string]string) (status string, createdMS int64) {
	return m["status"], MillisTime(m["created_ms"]).UnixMilli()
}

// StatusPartition reads a status hash's home partition (no field: an
// order of before partitions, in partition 0); ok is false for an empty
// hash (no such order).
func StatusPartition(m map[string]string) (partition int, ok bool) {
	if len(m) == 0 {
		return 0, false
	}
	p, _ := strconv.Atoi(m["partition"])
	return p, true
}
