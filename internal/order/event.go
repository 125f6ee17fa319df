package order

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// event is one order as the reserve script wrote it to the stream:
// fields order_id, user_id, created_ms, total_cents, items (JSON array of
// {sku, quantity, price_cents, round_id}).
type event struct {
	streamID   string
	orderID    uuid.UUID
	userID     uuid.UUID
	createdAt  time.Time
	totalCents int64
	items      []ReservedItem
	values     map[string]any // the entry as read, for the dead-letter stream
}

// errMalformed marks an entry that can never be written as it is.
var errMalformed = errors.New("malformed order event")

// parseEvent validates a stream entry completely, so that nothing the
// database would reject for its shape reaches a transaction.
func parseEvent(m redis.XMessage) (event, error) {
	e := event{streamID: m.ID, values: m.Values}
	field := func(name string) string { s, _ := m.Values[name].(string); return s }
	var err error
	if e.orderID, err = uuid.Parse(field("order_id")); err != nil {
		return e, fmt.Errorf("%w: order_id: %v", errMalformed, err)
	}
	if e.userID, err = uuid.Parse(field("user_id")); err != nil {
		return e, fmt.Errorf("%w: user_id: %v", errMalformed, err)
	}
	ms, err := strconv.ParseInt(field("created_ms"), 10, 64)
	if err != nil || ms <= 0 {
		return e, fmt.Errorf("%w: created_ms %q", errMalformed, field("created_ms"))
	}
	e.createdAt = time.UnixMilli(ms).UTC()
	if e.totalCents, err = strconv.ParseInt(field("total_cents"), 10, 64); err != nil || e.totalCents < 0 {
		return e, fmt.Errorf("%w: total_cents %q", errMalformed, field("total_cents"))
	}
	if err := json.Unmarshal([]byte(field("items")), &e.items); err != nil {
		return e, fmt.Errorf("%w: items: %v", errMalformed, err)
	}
	return e, checkItems(e)
}

// parseOwner reads only an entry's order id and buyer, for an entry that
// does not parse as a whole: enough to mark its order rejected and take it
// off the buyer's pending index. ok is false when either does not read.
func parseOwner(m redis.XMessage) (e event, ok bool) {
	e = event{streamID: m.ID, values: m.Values}
	field := func(name string) string { s, _ := m.Values[name].(string); return s }
	var oerr, uerr error
	e.orderID, oerr = uuid.Parse(field("order_id"))
	e.userID, uerr = uuid.Parse(field("user_id"))
	return e, oerr == nil && uerr == nil
}

func checkItems(e event) error {
	if len(e.items) == 0 || len(e.items) > MaxLines {
		return fmt.Errorf("%w: %d items", errMalformed, len(e.items))
	}
	var total int64
	seen := map[string]bool{}
	for _, it := range e.items {
		if it.SKU == "" || seen[it.SKU] || it.Quantity < 1 || it.Quantity > MaxQuantity ||
			it.PriceCents < 0 || it.RoundID < 1 {
			return fmt.Errorf("%w: item %+v", errMalformed, it)
		}
		seen[it.SKU] = true
		total += int64(it.Quantity) * it.PriceCents
	}
	if total != e.totalCents {
		return fmt.Errorf("%w: total %d is not the sum of the items (%d)", errMalformed, e.totalCents, total)
	}
	return nil
}

// persisted is the event as the after-commit hook sees it.
func (e event) persisted() Persisted {
	return Persisted{
		ID: e.orderID.String(), UserID: e.userID.String(), CreatedAt: e.createdAt,
		TotalCents: e.totalCents, Items: e.items,
	}
}
