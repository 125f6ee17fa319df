// Package keyspace says where the shop's Redis keys fall on a Redis
// Cluster: the hash slot of a key (Slot, as CLUSTER KEYSLOT computes it)
// and the order stream's partitions (Partitions), which on a cluster are
// also the slot groups the SKUs' live state is tagged by.
//
// The reasoning behind it is in docs/design/keyspace.md.
package keyspace

import (
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot is the hash slot of key: CRC16 (XMODEM) of its hash tag (the text
// between the first '{' and the next '}', when not empty) or of the whole
// key, mod 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % Slots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis's.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// MaxPartitions bounds the partitions: each is a stream every writer loop
// reads with a blocking call (a connection each).
const MaxPartitions = 256

// Partitions is how the order stream is partitioned. The zero value is
// one partition on a single Redis: the layout of before partitions.
type Partitions struct {
	n       int
	grouped bool
	tags    []string
}

// NewPartitions returns n partitions (1 to MaxPartitions); grouped (a
// Redis Cluster) also tags each SKU's keys by its partition.
func NewPartitions(n int, grouped bool) Partitions {
	n = min(max(n, 1), MaxPartitions)
	p := Partitions{n: n, grouped: grouped, tags: make([]string, n)}
	for k := range n {
		p.tags[k] = spreadTag(k, n)
	}
	return p
}

// Count is the number of partitions (at least 1).
func (p Partitions) Count() int { return max(p.n, 1) }

// Grouped reports whether the SKUs' keys are tagged by partition (a
// cluster) rather than by SKU.
func (p Partitions) Grouped() bool { return p.grouped }

// Of is the partition of sku: a hash of the SKU (CRC-32), mod Count.
// Every instance and writer must agree on Count: changing it moves SKUs
// between partitions (see the order package for what that costs).
func (p Partitions) Of(sku string) int {
	if p.Count() == 1 {
		return 0
	}
	return int(crc32.ChecksumIEEE([]byte(sku)) % uint32(p.Count()))
}

// Tag is partition k's hash tag, braces included ("{o3.12}").
func (p Partitions) Tag(k int) string {
	if p.tags == nil {
		return spreadTag(0, 1)
	}
	return p.tags[k]
}

// Legacy reports whether partition k keeps the untagged names of before
// partitions: partition 0 on a single Redis.
func (p Partitions) Legacy(k int) bool { return k == 0 && !p.grouped }

// Stamp returns id with partition k written into its last byte, where Home
// finds it (MaxPartitions fits a byte). The byte is random in a UUIDv7,
// whose version and variant bits lie elsewhere; ids stay unique (by their
// other 66 random bits and the time) and keep their time order. On a single
// Redis id is returned as it is.
func (p Partitions) Stamp(id uuid.UUID, k int) uuid.UUID {
	if !p.grouped {
		return id
	}
	id[15] = byte(k)
	return id
}

// Home is the partition a stamped order id names: its last byte, mod Count
// (an id from a client may name any byte; it then names some partition,
// whose keys do not hold it). An id that is not a UUID has partition 0.
func (p Partitions) Home(id string) int {
	u, err := uuid.Parse(id)
	if err != nil || !p.grouped {
		return 0
	}
	return int(u[15]) % p.Count()
}

// spreadTag is the first tag "{o<k>.<i>}" (i = 0, 1, ...) whose slot lies
// in the k-th n-th of the slot range: deterministic, so every process
// computes the same tags.
func spreadTag(k, n int) string {
	lo, hi := k*Slots/n, (k+1)*Slots/n
	for i := 0; ; i++ {
		tag := "o" + strconv.Itoa(k) + "." + strconv.Itoa(i)
		if s := int(crc16(tag)) % Slots; s >= lo && s < hi {
			return "{" + tag + "}"
		}
	}
}
