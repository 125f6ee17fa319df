package writer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
)

// event is one order as the reserve script wrote it to the stream:
// fields order_id, user_id, created_ms, total_cents, items (JSON array of
// {sku, quantity, price_cents, round_id, released}), expires_ms (0 or
// absent: no payment window).
type event struct {
	streamID   string
	orderID    uuid.UUID
	userID     uuid.UUID
	createdAt  time.Time
	expiresAt  time.Time // zero: none
	totalCents int64
	items      []order.ReservedItem
	values     map[string]any // the entry as read, for the dead-letter stream
	// traceparent is the purchase's trace context ("" when it was not
	// traced): the span that persists the order links to it.
	traceparent string
}

// kindTransition marks the stream's other kind of entry: an order leaving
// confirmed (or pending), added by the lifecycle step itself (order's
// pay.lua and transitionValues, or inventory's release with its outbox
// entry). Fields: kind, order_id,
// user_id, status (paid, cancelled, expired, refunded), at_ms, payment_ref,
// created_ms, items (as in the order's event).
const kindTransition = "transition"

// Transition is an order's final state change as the writer records it
// and its after-transition hook sees it.
type Transition struct {
	streamID   string
	OrderID    string
	UserID     string
	Status     string
	At         time.Time
	PaymentRef string
	CreatedAt  time.Time
	Items      []order.ReservedItem
	// traceparent is the trace context of the request that moved the
	// order ("" when it was not traced, or an expiry).
	traceparent string
}

// parseTransition validates a transition entry.
func parseTransition(m redis.XMessage) (Transition, error) {
	field := func(name string) string { s, _ := m.Values[name].(string); return s }
	t := Transition{streamID: m.ID, Status: field("status"), PaymentRef: field("payment_ref"),
		traceparent: field("traceparent")}
	id, err1 := uuid.Parse(field("order_id"))
	user, err2 := uuid.Parse(field("user_id"))
	if err := errors.Join(err1, err2); err != nil {
		return t, fmt.Errorf("%w: transition ids: %v", errMalformed, err)
	}
	t.OrderID, t.UserID = id.String(), user.String()
	switch t.Status {
	case order.StatusPaid, order.StatusCancelled, order.StatusExpired, order.StatusRefunded:
	default:
		return t, fmt.Errorf("%w: transition to %q", errMalformed, t.Status)
	}
	if t.At, t.CreatedAt = order.MillisTime(field("at_ms")), order.MillisTime(field("created_ms")); t.At.IsZero() || t.CreatedAt.IsZero() {
		return t, fmt.Errorf("%w: transition times %q %q", errMalformed, field("at_ms"), field("created_ms"))
	}
	if err := json.Unmarshal([]byte(field("items")), &t.Items); err != nil || len(t.Items) == 0 {
		return t, fmt.Errorf("%w: transition items: %v", errMalformed, err)
	}
	return t, nil
}

func isTransition(m redis.XMessage) bool {
	k, _ := m.Values["kind"].(string)
	return k == kindTransition
}

// errMalformed marks an entry that can never be written as it is.
var errMalformed = errors.New("malformed order event")

// parseEvent validates a stream entry completely, so that nothing the
// database would reject for its shape reaches a transaction.
func parseEvent(m redis.XMessage) (event, error) { return parseEventWith(m, nil) }

// itemsTexts holds the items of a batch's events decoded, by their JSON
// text. In a flash sale most of a batch's orders are one product at one
// price, their items texts byte for byte the same, and decoding them
// with encoding/json was a third of the writer's own CPU (~3.4 µs an
// order). It lives as long as one batch, so it is bounded by the batch.
type itemsTexts map[string][]order.ReservedItem

// decode returns the items text decoded: a copy of its own for each
// event, since the items go on to hooks and reports as the event's.
func (d itemsTexts) decode(text string) ([]order.ReservedItem, error) {
	if items, ok := d[text]; ok {
		return slices.Clone(items), nil
	}
	var items []order.ReservedItem
	if err := json.Unmarshal([]byte(text), &items); err != nil || d == nil {
		return items, err
	}
	d[text] = items
	return slices.Clone(items), nil
}

// parseEventWith is parseEvent decoding the items through texts (nil:
// each afresh).
func parseEventWith(m redis.XMessage, texts itemsTexts) (event, error) {
	e := event{streamID: m.ID, values: m.Values}
	field := func(name string) string { s, _ := m.Values[name].(string); return s }
	e.traceparent = field("traceparent")
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
	e.expiresAt = order.MillisTime(field("expires_ms"))
	if e.totalCents, err = strconv.ParseInt(field("total_cents"), 10, 64); err != nil || e.totalCents < 0 {
		return e, fmt.Errorf("%w: total_cents %q", errMalformed, field("total_cents"))
	}
	if e.items, err = texts.decode(field("items")); err != nil {
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
	if len(e.items) == 0 || len(e.items) > order.MaxLines {
		return fmt.Errorf("%w: %d items", errMalformed, len(e.items))
	}
	var total int64
	seen := map[string]bool{}
	for _, it := range e.items {
		if it.SKU == "" || seen[it.SKU] || it.Quantity < 1 || it.Quantity > order.MaxQuantity ||
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

// Entry is a stream entry as an audit reads it: an order event
// (Transition "") or a transition event (Transition: its new status).
type Entry struct {
	OrderID    string
	UserID     string
	Transition string
	Items      []order.ReservedItem
	// CreatedMS is when the order was accepted (Unix ms, its home's
	// clock).
	CreatedMS int64
}

// ParseEntry reads an order or transition event in the order package's format.
func ParseEntry(m redis.XMessage) (Entry, error) {
	if isTransition(m) {
		t, err := parseTransition(m)
		return Entry{OrderID: t.OrderID, UserID: t.UserID, Transition: t.Status, Items: t.Items,
			CreatedMS: t.CreatedAt.UnixMilli()}, err
	}
	e, err := parseEvent(m)
	if err != nil && e.orderID.String() == "" {
		return Entry{}, errors.Join(err, errMalformed)
	}
	return Entry{OrderID: e.orderID.String(), UserID: e.userID.String(), Items: e.items,
		CreatedMS: e.createdAt.UnixMilli()}, err
}
