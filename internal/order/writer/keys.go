package writer

import (
	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
)

// keys are the order package's key names the writer uses, by partition
// (order.StreamKeys): order owns them, the writer only reads and acks.
type keys struct {
	parts keyspace.Partitions
	p     []order.StreamKeys
}

func newKeys(prefix string, parts keyspace.Partitions) keys {
	// Only the key names: the ledger needs no client for them.
	return keys{parts: parts, p: order.NewLedger(nil, prefix, parts).Partitions()}
}

func (k keys) stream(p int) string        { return k.p[p].Stream }
func (k keys) dead(p int) string          { return k.p[p].Dead }
func (k keys) releases(p int) string      { return k.p[p].Releases }
func (k keys) status(id string) string    { return k.p[0].StatusKey(id) }
func (k keys) pending(user string) string { return k.p[0].PendingKey(user) }

const group = order.StreamGroup
