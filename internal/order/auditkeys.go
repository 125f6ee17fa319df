package order

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

// StreamKeys are the order package's keys an audit reads (never writes):
// the stream and its group, the dead letters, and the status hashes.
type StreamKeys struct {
	Stream, Group, Dead string
	// StatusPattern matches every order status hash (for SCAN); StatusKey
	// names one.
	StatusPattern string
	prefix        string
}

// StatusKey is the key of order id's status hash.
func (k StreamKeys) StatusKey(id string) string { return keys{prefix: k.prefix}.status(id) }

// AuditKeys returns the stream keys under prefix of the one partition of a
// single Redis (the audit does not read partitioned streams yet).
func AuditKeys(prefix string) StreamKeys {
	k := keys{prefix: prefix}
	return StreamKeys{Stream: k.stream(0), Group: group, Dead: k.dead(0), StatusPattern: k.status("*"), prefix: prefix}
}

// Entry is a stream entry as an audit reads it: an order event
// (Transition "") or a transition event (Transition: its new status).
type Entry struct {
	OrderID    string
	UserID     string
	Transition string
	Items      []ReservedItem
}

// ParseEntry reads an order or transition event in this package's format.
func ParseEntry(m redis.XMessage) (Entry, error) {
	if isTransition(m) {
		t, err := parseTransition(m)
		return Entry{OrderID: t.OrderID, UserID: t.UserID, Transition: t.Status, Items: t.Items}, err
	}
	e, err := parseEvent(m)
	if err != nil && e.orderID.String() == "" {
		return Entry{}, errors.Join(err, errMalformed)
	}
	return Entry{OrderID: e.orderID.String(), UserID: e.userID.String(), Items: e.items}, err
}

// LiveStatus reads a status hash's status and creation time (Unix ms).
func LiveStatus(m map[string]string) (status string, createdMS int64) {
	return m["status"], msTime(m["created_ms"]).UnixMilli()
}
