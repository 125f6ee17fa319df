package order

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
)

var (
	//go:embed pay.lua
	payLua    string
	payScript = redis.NewScript(payLua)
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

// StockChanged is told the SKUs whose live available stock went up (a
// cancelled or expired order gave units back), after the step. Live-stock
// events hang on it.
type StockChanged func(ctx context.Context, skus []string)

// lifecycle is the Redis side of the order's state machine, shared by the
// Service (pay, cancel) and the Sweeper (expiry).
type lifecycle struct {
	log     *slog.Logger
	rdb     redis.UniversalClient
	stock   *inventory.Stock
	keys    keys
	changed StockChanged

	// faultAfterDecision, for tests, stops giveBackSpread right after its
	// decision step, as a crash would.
	faultAfterDecision func() error
}

// read returns the order's live status; found is false when Redis has
// none (never placed, or forgotten after statusTTL).
func (l *lifecycle) read(ctx context.Context, id string) (Order, bool, error) {
	m, err := l.rdb.HGetAll(ctx, l.keys.status(id)).Result()
	if err != nil || m["status"] == "" {
		return Order{}, false, err
	}
	return parseLive(id, m)
}

// giveBack moves a pending or confirmed order to status to (cancelled or
// expired) and gives its units back, in one atomic step: inventory's
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
		lines = append(lines, inventory.ReleaseLine{SKU: it.SKU, Quantity: it.Quantity, RoundID: it.RoundID})
	}
	r, err := l.stock.Release(ctx, l.guarded(o, to, lines))
	if err != nil || r.Refused {
		return r, err
	}
	// Out of the due set: harmless if this fails, the sweeper drops an
	// order it finds no longer pending or confirmed.
	_ = l.rdb.ZRem(ctx, l.keys.due(o.partition), o.ID).Err()
	if r.Units > 0 && l.changed != nil {
		l.changed(ctx, o.skus())
	}
	return r, nil
}

// guarded is the release of lines (o's, in its home partition) that moves
// o from pending or confirmed to to, with the transition event as its
// outbox entry on o's stream.
func (l *lifecycle) guarded(o Order, to string, lines []inventory.ReleaseLine) inventory.Release {
	return inventory.Release{
		OrderID: o.ID, UserID: o.userID, Lines: lines,
		Guard: &inventory.Guard{Key: l.keys.status(o.ID), Field: "status",
			From: []string{StatusPending, StatusConfirmed}, To: to},
		Outbox: &inventory.Outbox{Stream: l.keys.stream(o.partition), Values: transitionValues(o, to, time.Now(), "")},
	}
}

func (o Order) skus() []string {
	out := make([]string, len(o.Items))
	for i, it := range o.Items {
		out[i] = it.SKU
	}
	return out
}

// kindTransition marks a transition entry of the order stream: an order
// leaving confirmed (or pending), added by the lifecycle step itself
// (pay.lua, or inventory's release with its outbox entry). The writer
// reads it (internal/order/writer's event.go).
const kindTransition = "transition"

// transitionValues is the transition event for o moving to status at at
// (the format: internal/order/writer's event.go).
func transitionValues(o Order, status string, at time.Time, ref string) []string {
	items, _ := json.Marshal(o.lines) // ReservedItems always marshal
	return []string{
		"kind", kindTransition, "order_id", o.ID, "user_id", o.userID, "status", status,
		"at_ms", strconv.FormatInt(at.UnixMilli(), 10), "payment_ref", ref,
		"created_ms", strconv.FormatInt(o.CreatedAt.UnixMilli(), 10), "items", string(items),
	}
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
	oid, err := uuid.Parse(id)
	if err != nil {
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

// Pay charges the order's total through the payment provider and marks it
// paid, unless its payment window closed first: exactly one of a payment
// and an expiry (or a cancellation) racing it wins, and the loser's money
// is refunded. Paying a paid order answers the same and charges nothing.
//
// Errors: ErrNotFound, ErrOrderPending (not persisted yet: retry),
// ErrNotPayable (cancelled, expired or rejected), ErrDeclined, or a 503
// (Redis or the provider did not answer; paying again with the same token
// charges at most once).
func (s *Service) Pay(ctx context.Context, user, id, token string) (Order, error) {
	o, err := s.payable(ctx, user, id)
	if err != nil || o.Status == StatusPaid {
		return o, err
	}
	ref, err := s.payments.Charge(ctx, Charge{Key: chargeKey(o.ID, token), OrderID: o.ID,
		AmountCents: o.TotalCents, Token: token})
	switch {
	case errors.Is(err, ErrPaymentDeclined):
		s.metrics.pay("declined")
		return Order{}, ErrDeclined
	case err != nil:
		s.log.Warn("payment provider", "order", o.ID, "err", err)
		return Order{}, fmt.Errorf("charge order %s: %w: %w", o.ID, apperr.Unavailable("the payment provider is unavailable"), err)
	}
	return s.markPaid(ctx, o, ref)
}

// payable returns the order if a payment may go ahead (or it is paid
// already), else the refusal. An order whose window closed is expired on
// the spot rather than waiting for the sweeper.
func (s *Service) payable(ctx context.Context, user, id string) (Order, error) {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	o, live, err := s.liveOrder(ctx, user, id)
	if err != nil {
		return Order{}, err
	}
	switch {
	case o.Status == StatusPaid:
		return o, nil
	case !live:
		return Order{}, ErrNotPayable
	case o.Status == StatusPending:
		return Order{}, ErrOrderPending
	case o.Status == StatusConfirmed && o.ExpiresAt != nil && !time.Now().Before(*o.ExpiresAt):
		return s.expireNow(ctx, o)
	case o.Status == StatusConfirmed:
		return o, nil
	}
	return Order{}, ErrNotPayable
}

// markPaid runs the pay script after a successful charge.
func (s *Service) markPaid(ctx context.Context, o Order, ref string) (Order, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lifecycleTimeout)
	defer cancel()
	reply, err := payScript.Run(ctx, s.rdb, []string{s.keys.status(o.ID), s.keys.due(o.partition), s.keys.stream(o.partition)},
		o.ID, ref).StringSlice()
	if err != nil {
		// Unknown outcome: keep the charge; a retry with the same token
		// reuses it (same key) and learns the state.
		return Order{}, s.unavailable("mark order paid", err)
	}
	switch {
	case reply[0] == "ok" && len(reply) == 2:
		t := MillisTime(reply[1])
		o.Status, o.PaidAt = StatusPaid, &t
		s.metrics.transition(StatusPaid, 0)
		s.metrics.pay("paid")
		return o, nil
	case reply[0] == "state" && len(reply) == 3 && reply[1] == StatusPaid:
		// A concurrent pay won; ours is a second charge unless it is the
		// same one (same key).
		if reply[2] != ref {
			s.refund(ctx, o.ID, ref)
		}
		return s.paidNow(ctx, o)
	case reply[0] == "late":
		s.refund(ctx, o.ID, ref)
		return s.expireNow(ctx, o)
	}
	s.refund(ctx, o.ID, ref)
	s.metrics.pay("not_payable")
	return Order{}, ErrNotPayable
}

// paidNow reads back an order another call paid.
func (s *Service) paidNow(ctx context.Context, o Order) (Order, error) {
	now, found, err := s.life.read(ctx, o.ID)
	if err != nil || !found {
		o.Status = StatusPaid
		return o, nil //nolint:nilerr // paid it is; only paid_at is missing
	}
	return now, nil
}

// expireNow expires an order whose window closed (the sweeper would, a
// moment later) and answers the payment: refused, unless another payment
// made it in time.
func (s *Service) expireNow(ctx context.Context, o Order) (Order, error) {
	r, err := s.life.giveBack(ctx, o, StatusExpired)
	switch {
	case err != nil:
		return Order{}, s.unavailable("expire order", err)
	case r.Refused && r.State == StatusPaid:
		return s.paidNow(ctx, o)
	case !r.Refused:
		s.metrics.transition(StatusExpired, r.Units)
	}
	s.metrics.pay("not_payable")
	return Order{}, ErrNotPayable
}

func (s *Service) refund(ctx context.Context, id, ref string) {
	if err := s.payments.Refund(ctx, ref); err != nil {
		s.log.Error("refund failed: refund it by hand", "order", id, "payment_ref", ref, "err", err)
	}
}

// chargeKey is the provider's idempotency key of paying order id with
// token: a retry of the same payment reuses the charge; another card (a
// new token after a decline) is another charge.
func chargeKey(id, token string) string {
	sum := sha256.Sum256([]byte(token))
	return "order:" + id + ":" + hex.EncodeToString(sum[:8])
}
