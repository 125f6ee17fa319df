package order

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/telemetry"
)

// Errors of the lifecycle steps.
var (
	// ErrOrderPending: the order is not persisted yet; pay again shortly.
	ErrOrderPending = &apperr.Error{Code: apperr.CodeOrderPending,
		Detail: "the order is still being recorded; pay again in a moment", RetryAfter: 1}
	ErrNotPayable     = apperr.NewError(apperr.CodeOrderNotPayable, "the order was cancelled or has expired")
	ErrNotCancellable = apperr.NewError(apperr.CodeNotCancellable, "the order was paid or has expired")
	ErrDeclined       = apperr.NewError(apperr.CodePaymentDeclined, "the payment was declined")
)

// lifecycleTimeout bounds each Redis step of pay and cancel.
const lifecycleTimeout = 2 * time.Second

// lifecycle is the Redis side of the order's state machine, shared by the
// Service (pay, cancel) and the expiry sweeper (Expiry).
type lifecycle struct {
	log   *slog.Logger
	rdb   redis.UniversalClient
	stock *inventory.Stock
	keys  orderkey.Keys

	// faultAfterDecision, for tests, stops giveBackSpread right after its
	// decision step, as a crash would.
	faultAfterDecision func() error
}

func newLifecycle(rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger) *lifecycle {
	return &lifecycle{log: log, rdb: rdb, stock: stock, keys: orderkey.New(prefix, stock.Partitions())}
}

// read returns the order's live status; found is false when Redis has
// none (never placed, or forgotten after statusTTL).
func (l *lifecycle) read(ctx context.Context, id string) (Order, bool, error) {
	m, err := l.rdb.HGetAll(ctx, l.keys.Status(id)).Result()
	if err != nil || m["status"] == "" {
		return Order{}, false, err
	}
	return parseLive(id, m)
}

// giveBack moves an order to status to (a pending or confirmed one to
// cancelled or expired, a paid one to refunded: fromOf) and gives its
// units back, in one atomic step: inventory's
// release, guarded by the order's status and carrying the transition
// event for PostgreSQL as its outbox entry. Of two calls (a cancel and an
// expiry, two sweepers) exactly one passes the guard; the other is
// Refused with the state the first left.
//
// An order whose lines lie in several partitions of a cluster (a
// cross-shard checkout) takes several steps instead: giveBackSpread.
func (l *lifecycle) giveBack(ctx context.Context, o Order, to string) (inventory.Released, error) {
	if l.spread(o) {
		return l.giveBackSpread(ctx, o, to)
	}
	var lines []inventory.ReleaseLine
	for _, it := range o.lines {
		lines = append(lines, releaseLine(it))
	}
	r, err := l.stock.Release(ctx, l.guarded(ctx, o, to, lines))
	if err != nil || r.Refused {
		return r, err
	}
	// Out of the due set: harmless if this fails, the sweeper drops an
	// order it finds no longer pending or confirmed.
	_ = l.rdb.ZRem(ctx, l.keys.Due(o.partition), o.ID).Err()
	return r, nil
}

// releaseLine is the release of order line it: into the bucket it was
// bought from.
func releaseLine(it ReservedItem) inventory.ReleaseLine {
	return inventory.ReleaseLine{SKU: it.SKU, Quantity: it.Quantity, RoundID: it.RoundID, Buckets: it.Buckets}
}

// linePartition is the partition of o's line it on a cluster: its
// bucket's.
func (l *lifecycle) linePartition(o Order, it ReservedItem) int {
	return l.stock.HomeIn(it.SKU, o.userID, it.Buckets).Partition
}

// guarded is the release of lines (o's, in its home partition) that moves
// o from fromOf(to) to to, with the transition event as its
// outbox entry on o's stream, carrying ctx's trace.
func (l *lifecycle) guarded(ctx context.Context, o Order, to string, lines []inventory.ReleaseLine) inventory.Release {
	return inventory.Release{
		OrderID: o.ID, UserID: o.userID, Lines: lines,
		Guard: &inventory.Guard{Key: l.keys.Status(o.ID), Field: "status",
			From: fromOf(to), To: to},
		Outbox: &inventory.Outbox{Stream: l.keys.Stream(o.partition), Values: transitionValues(o, to, time.Now(), o.paymentRef, telemetry.Traceparent(ctx))},
	}
}

// fromOf is the statuses an order may move to to from by giving its
// units back: only a paid order is refunded, only an unpaid one cancelled
// or expired, so a payment and a cancel (or expiry) never both win.
func fromOf(to string) []string {
	if to == StatusRefunded {
		return []string{StatusPaid}
	}
	return []string{StatusPending, StatusConfirmed}
}

// kindTransition marks a transition entry of the order stream: an order
// leaving confirmed (or pending), added by the lifecycle step itself
// (pay.lua, or inventory's release with its outbox entry). The writer
// reads it (internal/order/writer's event.go).
const kindTransition = "transition"

// transitionValues is the transition event for o moving to status at at
// (the format: internal/order/writer's event.go), with the traceparent of
// the request that moved it when that was traced, so that the writer's
// span recording it links to that request.
func transitionValues(o Order, status string, at time.Time, ref, traceparent string) []string {
	items, _ := json.Marshal(o.lines) // ReservedItems always marshal
	v := []string{
		"kind", kindTransition, "order_id", o.ID, "user_id", o.userID, "status", status,
		"at_ms", strconv.FormatInt(at.UnixMilli(), 10), "payment_ref", ref,
		"created_ms", strconv.FormatInt(o.CreatedAt.UnixMilli(), 10), "items", string(items),
	}
	if traceparent != "" {
		v = append(v, "traceparent", traceparent)
	}
	return v
}

// Cancel cancels user's order id: its units go back to the stock (while
// their round is live) and to the buyer's count, exactly once. Cancelling
// a cancelled order answers the same. Errors: ErrNotFound (also another
// user's order), ErrNotCancellable (paid, expired or rejected), or a 503.
func (s *Service) Cancel(ctx context.Context, user, id string) (Order, error) {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	o, live, err := s.liveOrder(ctx, user, id)
	if err != nil {
		return Order{}, err
	}
	switch {
	case o.Status == StatusCancelled:
		return o, nil
	case !live || (o.Status != StatusPending && o.Status != StatusConfirmed):
		return Order{}, ErrNotCancellable
	}
	r, err := s.life.giveBack(ctx, o, StatusCancelled)
	if err != nil {
		return Order{}, s.unavailable("cancel order", err)
	}
	if r.Refused {
		// Another step won the race: answer as if it had come first.
		if r.State == StatusCancelled {
			o.Status = StatusCancelled
			return o, nil
		}
		return Order{}, ErrNotCancellable
	}
	s.metrics.transition(StatusCancelled, r.Units)
	o.Status = StatusCancelled
	return o, nil
}

// liveOrder returns user's order from its Redis status, which every
// lifecycle step goes by (live is true). An order Redis has forgotten
// (after statusTTL) but PostgreSQL knows can no longer change: it is
// returned from PostgreSQL with live false.
func (s *Service) liveOrder(ctx context.Context, user, id string) (o Order, live bool, err error) {
	oid, ok := parseID(id) // as Get reads it: a URN or braces name no order
	if !ok {
		return Order{}, false, ErrNotFound
	}
	if o, found, err := s.liveStatusOf(ctx, user, oid.String()); err != nil || found {
		return o, found, err
	}
	if s.betweenReads != nil {
		s.betweenReads()
	}
	o, err = s.scanOrder(s.db.QueryRow(ctx, selectOrderSQL, oid, user))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Order{}, false, ErrNotFound
	case err != nil:
		return Order{}, false, s.unavailable("get order", err)
	}
	// PostgreSQL has it, but it may have been placed (and written) after
	// Redis was asked: then Redis has its status now, and it is live, not
	// forgotten. A status is forgotten only statusTTL (a week) after its
	// order was placed, long after it was written, so a second miss is
	// decisive (a status a failover lost is the repair's to decide first:
	// errDeciding).
	if now, found, err := s.liveStatusOf(ctx, user, o.ID); err != nil || found {
		return now, found, err
	}
	return o, false, nil
}

// liveStatusOf reads order id's Redis status for user (found false when
// Redis has none; ErrNotFound when it is another user's).
func (s *Service) liveStatusOf(ctx context.Context, user, id string) (Order, bool, error) {
	o, found, err := s.liveStatus(ctx, id)
	switch {
	case err != nil:
		return Order{}, false, s.unavailable("order status", err)
	case found && o.userID != user:
		return Order{}, false, ErrNotFound
	}
	return o, found, nil
}

// markErased adds erasedMember to user's pending index for as long as
// any order of theirs may still be placed: the index's lifetime.
func (s *Service) markErased(ctx context.Context, user string) error {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	key := s.keys.Pending(user)
	pipe := s.rdb.TxPipeline()
	pipe.ZAdd(ctx, key, redis.Z{Score: math.Inf(1), Member: erasedMember})
	pipe.PExpire(ctx, key, s.statusTTL())
	_, err := pipe.Exec(ctx)
	return err
}

// unpaidPage is how many orders CancelUnpaid reads a page.
const unpaidPage = 100

// CancelUnpaid cancels every unpaid (pending or confirmed) order of user,
// as Cancel does, and returns how many of them ended cancelled: a user's erasure
// (docs/api.md) leaves no units held by nobody. Their units go back exactly
// once, so a repeat cancels nothing more; an order paid or expired
// meanwhile is left as it is. Errors: a 503.
//
// It first marks user erased in their pending index (erasedMember), which
// every placement writes in the step that accepts an order: one that
// comes later is refused ErrBuyerErased (a saga's is cancelled by its own
// finish), and one that came earlier is in the index or in PostgreSQL
// for the list below. So a purchase whose session check passed just
// before the sessions were revoked cannot keep units behind it.
func (s *Service) CancelUnpaid(ctx context.Context, user string) (int, error) {
	if err := s.markErased(ctx, user); err != nil {
		return 0, s.unavailable("mark the buyer erased", err)
	}
	var unpaid []string
	for cursor := ""; ; {
		page, err := s.List(ctx, user, unpaidPage, cursor)
		if err != nil {
			return 0, err
		}
		for _, o := range page.Items {
			if o.Status == StatusPending || o.Status == StatusConfirmed {
				unpaid = append(unpaid, o.ID)
			}
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	n := 0
	for _, id := range unpaid {
		o, err := s.Cancel(ctx, user, id)
		switch {
		case errors.Is(err, ErrNotCancellable):
			// Paid or expired since the list was read, or its live status
			// is gone (a week old with no payment window): then nothing
			// can cancel it, and an operator should know.
			s.log.Warn("an unpaid order of an erased buyer was not cancelled", "order", id, "err", err)
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return n, err
		case o.Status == StatusCancelled:
			n++
		}
	}
	return n, nil
}
