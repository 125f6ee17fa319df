package order

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/outage"
)

const (
	// An order's status in PostgreSQL is its recorded transition, if any,
	// else confirmed.
	orderColumnsSQL = `
SELECT o.id, o.total_cents, o.created_at, o.expires_at, coalesce(t.status, 'confirmed'),
       CASE WHEN t.status IN ('paid', 'refunded') THEN t.at END, coalesce(t.payment_ref, ''),
       coalesce(json_agg(json_build_object('sku', i.sku, 'quantity', i.quantity, 'price_cents', i.price_cents)
                ORDER BY i.sku) FILTER (WHERE i.sku IS NOT NULL), '[]')
FROM orders o LEFT JOIN order_items i ON i.order_id = o.id
LEFT JOIN order_transitions t ON t.order_id = o.id`

	selectOrderSQL = orderColumnsSQL + `
WHERE o.id = $1 AND o.user_id = $2
GROUP BY o.id, t.order_id`

	// Newest first, keyset on (created_at, id) so pages never shift.
	listOrdersSQL = orderColumnsSQL + `
WHERE o.user_id = $1 AND (o.created_at, o.id) < ($2, $3)
GROUP BY o.id, t.order_id
ORDER BY o.created_at DESC, o.id DESC
LIMIT $4`
)

// queryTimeout bounds every read, so an outage answers 503 quickly.
const queryTimeout = 3 * time.Second

// Get returns user's order id. Its live status in Redis, which every
// lifecycle step changes first, wins while Redis has it (pending until the
// writer has persisted it, then confirmed, paid, cancelled or expired);
// PostgreSQL answers for the rest. Another user's order, like a missing
// one, is ErrNotFound.
func (s *Service) Get(ctx context.Context, user, id string) (Order, error) {
	oid, ok := parseID(id)
	if !ok {
		return Order{}, ErrNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	live, found, rerr := s.liveStatus(ctx, oid.String())
	if found && live.userID != user {
		return Order{}, ErrNotFound
	}
	if found {
		return s.withPayment(ctx, live), nil
	}
	if s.betweenReads != nil {
		s.betweenReads()
	}
	o, err := s.scanOrder(s.db.QueryRow(ctx, selectOrderSQL, oid, user))
	switch {
	case errors.Is(err, pgx.ErrNoRows) && rerr != nil:
		// Not in PostgreSQL, and Redis could not say whether it is pending.
		return Order{}, s.unavailable("get order status", rerr)
	case errors.Is(err, pgx.ErrNoRows):
		return Order{}, ErrNotFound
	case err != nil:
		return Order{}, s.unavailable("get order", err)
	}
	if rerr == nil {
		// Placed and written after Redis was asked, its status is in Redis
		// now, and may be ahead of the row (paid already, say).
		if now, found, err := s.liveStatus(ctx, o.ID); err == nil && found && now.userID == user {
			return s.withPayment(ctx, now), nil
		}
	}
	return s.withPayment(ctx, o), nil
}

// liveStatus reads an order's status hash; found is false when Redis has
// none (never placed, or forgotten a week after it was placed), and the
// error is errDeciding while the repair decides a status a failover lost.
func (s *Service) liveStatus(ctx context.Context, id string) (o Order, found bool, err error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Status(id)).Result()
	switch {
	case err != nil || m["status"] == "":
		return Order{}, false, err
	case m["deciding"] != "":
		return Order{}, false, errDeciding
	}
	return parseLive(id, m)
}

// errDeciding: the saga repair is asking PostgreSQL whether the order is
// a written one whose status a failover lost (internal/order/saga's repair). Until it has
// decided, neither Redis nor a PostgreSQL row can say whether the order
// is live: an answer about it waits, rather than refusing it.
var errDeciding = apperr.Unavailable("the order's status is being recovered; retry in a moment")

// parseLive reads an order status hash (see the package doc).
func parseLive(id string, m map[string]string) (Order, bool, error) {
	if m["items"] == "" {
		return Order{}, false, nil // a partial hash: no live state to go by
	}
	o := Order{ID: id, Status: m["status"], userID: m["user_id"], paymentRef: m["payment_ref"]}
	// No field: partition 0 (not written), or an order of before partitions.
	o.partition, _ = strconv.Atoi(m["partition"])
	if err := json.Unmarshal([]byte(m["items"]), &o.lines); err != nil {
		return Order{}, false, fmt.Errorf("order %s status: %w", id, err)
	}
	o.Items = make([]Item, len(o.lines))
	for i, l := range o.lines {
		o.Items[i] = Item{SKU: l.SKU, Quantity: l.Quantity, PriceCents: l.PriceCents}
	}
	o.TotalCents, _ = strconv.ParseInt(m["total_cents"], 10, 64)
	o.CreatedAt = MillisTime(m["created_ms"])
	if t := MillisTime(m["expires_ms"]); !t.IsZero() {
		o.ExpiresAt = &t
	}
	if t := MillisTime(m["paid_ms"]); !t.IsZero() {
		o.PaidAt = &t
	}
	return o, true, nil
}

// MillisTime reads a Unix-millisecond field of an order entry or status
// hash; "" or 0 is the zero time.
func MillisTime(s string) time.Time {
	ms, _ := strconv.ParseInt(s, 10, 64)
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func (s *Service) scanOrder(row pgx.Row) (Order, error) {
	var o Order
	var id uuid.UUID
	var items []byte
	if err := row.Scan(&id, &o.TotalCents, &o.CreatedAt, &o.ExpiresAt, &o.Status, &o.PaidAt, &o.paymentRef,
		&items); err != nil {
		return Order{}, err
	}
	o.ID, o.CreatedAt = id.String(), o.CreatedAt.UTC()
	o.ExpiresAt, o.PaidAt = utcPtr(o.ExpiresAt), utcPtr(o.PaidAt)
	if err := json.Unmarshal(items, &o.Items); err != nil {
		return Order{}, fmt.Errorf("order %s items: %w", o.ID, err)
	}
	return o, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Page is one page of a buyer's orders.
type Page struct {
	Items      []Order `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// List returns user's orders newest first: the pending ones from Redis
// merged with the confirmed ones from PostgreSQL, on one keyset
// (created_at, id), so a page boundary never loses or repeats an order.
func (s *Service) List(ctx context.Context, user string, limit int, cursor string) (Page, error) {
	after, err := decodeCursor(cursor)
	if err != nil {
		return Page{}, apperr.Invalid(apperr.FieldError{Field: "cursor", Message: "is not a cursor this API returned"})
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	// Redis first: the writer commits an order to PostgreSQL before it
	// confirms it in Redis (dropping it from the pending index), so an
	// order pending at the first read and confirmed before the second is
	// in both (merge keeps one). Read the other way round, it would be in
	// neither.
	pending, err := s.pendingBefore(ctx, user, after, limit+1)
	if err != nil {
		return Page{}, s.unavailable("list pending orders", err)
	}
	if s.betweenReads != nil {
		s.betweenReads()
	}
	rows, err := s.db.Query(ctx, listOrdersSQL, user, after.at, after.id, limit+1)
	if err != nil {
		return Page{}, s.unavailable("list orders", err)
	}
	confirmed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Order, error) { return s.scanOrder(r) })
	if err != nil {
		return Page{}, s.unavailable("list orders", err)
	}
	s.overlay(ctx, confirmed)
	page := paginate(merge(confirmed, pending), limit)
	s.withPayments(ctx, page.Items)
	return page, nil
}

// overlay gives persisted orders their live status, which runs ahead of
// PostgreSQL's record by the writer's lag (a payment just made), in one
// round trip. Without Redis the page keeps PostgreSQL's statuses.
func (s *Service) overlay(ctx context.Context, orders []Order) {
	if len(orders) == 0 {
		return
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(orders))
	for i, o := range orders {
		cmds[i] = pipe.HMGet(ctx, s.keys.Status(o.ID), "status", "paid_ms", "payment_ref")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return
	}
	for i, c := range cmds {
		v := c.Val()
		// Not a tombstone's: the order in PostgreSQL is the repair's to
		// decide (errDeciding), and its row says what it was.
		if st, ok := v[0].(string); ok && st != "" && st != StatusPending && st != StatusAborted {
			orders[i].Status = st
		}
		if ms, ok := v[1].(string); ok {
			if t := MillisTime(ms); !t.IsZero() {
				orders[i].PaidAt = &t
			}
		}
		if ref, ok := v[2].(string); ok && ref != "" {
			orders[i].paymentRef = ref
		}
	}
}

// pendingBefore reads the buyer's pending orders older than the cursor.
// The index may name orders that are not pending any more: on a cluster it
// is written after the order (internal/order/saga), so a writer may confirm the order
// (and drop the entry) before the entry is added, and an entry may name an
// order that is gone. Such entries are skipped and dropped, and the index
// is read on past them, so they never hide a pending order from a page.
// An order whose entry was never written (a crash right after its commit)
// is listed once the writer has persisted it.
func (s *Service) pendingBefore(ctx context.Context, user string, after position, n int) ([]Order, error) {
	key := s.keys.Pending(user)
	window := int64(n) + 16
	var out []Order
	for offset := int64(0); offset < maxPendingScan && len(out) < n; offset += window {
		ids, err := s.rdb.ZRevRangeByScore(ctx, key, &redis.ZRangeBy{
			Max: strconv.FormatInt(after.at.UnixMilli(), 10), Min: "-inf", Offset: offset, Count: window,
		}).Result()
		if err != nil {
			return nil, err
		}
		var stale []any
		for _, id := range ids {
			o, found, err := s.liveStatus(ctx, id)
			switch {
			case errors.Is(err, errDeciding):
				continue // PostgreSQL lists it if it is a written order
			case err != nil:
				return nil, err
			}
			switch {
			case !found || o.Status == StatusConfirmed:
				stale = append(stale, id)
			case o.userID == user && before(o, after):
				out = append(out, o)
			}
		}
		if len(stale) > 0 {
			// Best effort: a failure leaves them to be skipped again.
			if s.rdb.ZRem(ctx, key, stale...).Err() == nil {
				offset -= int64(len(stale))
			}
		}
		if int64(len(ids)) < window {
			break
		}
	}
	return out, nil
}

// maxPendingScan bounds how many index entries one page reads.
const maxPendingScan = 1000

// merge joins both sources newest first; an order in both (confirmed
// between the two reads) is taken from PostgreSQL.
func merge(confirmed, pending []Order) []Order {
	seen := make(map[string]bool, len(confirmed))
	for _, o := range confirmed {
		seen[o.ID] = true
	}
	out := append([]Order(nil), confirmed...)
	for _, o := range pending {
		if !seen[o.ID] {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b Order) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out
}

func paginate(all []Order, limit int) Page {
	p := Page{Items: all}
	if len(all) > limit {
		p.Items = all[:limit]
		last := p.Items[limit-1]
		c := encodeCursor(position{at: last.CreatedAt, id: last.ID})
		p.NextCursor = &c
	}
	if p.Items == nil {
		p.Items = []Order{}
	}
	return p
}

// position is a point in the (created_at, id) order; the zero cursor is
// "after everything".
type position struct {
	at time.Time
	id string
}

func before(o Order, p position) bool {
	return o.CreatedAt.Before(p.at) || (o.CreatedAt.Equal(p.at) && o.ID < p.id)
}

// parseID accepts an order id only in the canonical 36-character form the
// server hands out (hex case-insensitive, as RFC 9562 reads it): uuid.Parse
// also takes "urn:uuid:...", braces and bare hex, which are not our ids.
func parseID(s string) (uuid.UUID, bool) {
	if len(s) != 36 {
		return uuid.UUID{}, false
	}
	id, err := uuid.Parse(s)
	return id, err == nil
}

func encodeCursor(p position) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(p.at.UnixMicro(), 10) + "." + p.id))
}

// maxCursorMicros bounds a cursor's time: no order is created past 9999,
// and PostgreSQL refuses timestamps far beyond.
var maxCursorMicros = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// decodeCursor accepts exactly what encodeCursor makes: a cursor is opaque,
// so anything else (another base64 spelling, a non-canonical id that the
// database would fail to cast, a time outside any order's) was not issued
// by this API.
func decodeCursor(c string) (position, error) {
	if c == "" {
		return position{at: time.Now().Add(24 * time.Hour), id: "ffffffff-ffff-ffff-ffff-ffffffffffff"}, nil
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil {
		return position{}, err
	}
	us, id, _ := strings.Cut(string(raw), ".")
	n, err := strconv.ParseInt(us, 10, 64)
	oid, ok := parseID(id)
	if err != nil || !ok || n < 0 || n >= maxCursorMicros {
		return position{}, errors.New("bad cursor")
	}
	p := position{at: time.UnixMicro(n).UTC(), id: oid.String()}
	if encodeCursor(p) != c {
		return position{}, errors.New("bad cursor: not in canonical form")
	}
	return p, nil
}

// unavailable maps a store error: an outage (outage.Is) is a
// 503 and a warning; anything else is a bug, returned for the 500 handler,
// which logs it.
func (s *Service) unavailable(op string, err error) error {
	if !outage.Is(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.log.Warn(op, "err", err)
	return fmt.Errorf("%s: %w: %w", op, apperr.Unavailable("orders are unavailable"), err)
}
