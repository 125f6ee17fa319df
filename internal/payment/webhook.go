package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/metric"
	"github.com/shop-oss/shop/internal/order"
)

// Orders is what a provider's events change: order's Service.
type Orders interface {
	PaymentSucceeded(ctx context.Context, orderID string, p order.Payment) (string, error)
	PaymentFailed(ctx context.Context, orderID string, p order.Payment) error
	PaymentRefunded(ctx context.Context, id string, cents int64) error
}

// Entries is what a provider's events of a draw entry's hold change (its
// intent's metadata names the entry): draw's Service. HoldSeen returns
// what it did ("": nothing), for reconcile's report.
type Entries interface {
	HoldSeen(ctx context.Context, entryID string, p order.Payment) (string, error)
}

// The event types the webhook applies; Stripe's others are answered and
// ignored. A hold's are applied to draw entries only.
const (
	EventSucceeded  = "payment_intent.succeeded"
	EventFailed     = "payment_intent.payment_failed"
	EventRefunded   = "charge.refunded"
	EventCapturable = "payment_intent.amount_capturable_updated"
	EventCanceled   = "payment_intent.canceled"
)

// signatureTolerance is how far a signature's time may be from ours
// (Stripe's default): a replayed event older than this is refused, and
// so is one signed further ahead, which would otherwise stay replayable
// until our clock caught up.
const signatureTolerance = 5 * time.Minute

// applyTimeout bounds one event's effect, its provider calls included.
const applyTimeout = 15 * time.Second

// Webhook receives Stripe's events (POST /api/v1/payments/stripe/webhook)
// and applies each event id once: recorded in payment_events before its
// effect, marked applied after it, under the row's lock, so repeats and
// concurrent deliveries of one event do nothing more.
type Webhook struct {
	db     *pgxpool.Pool
	secret string
	orders Orders
	// entries takes the events of draw entries' holds (nil: logged and
	// ignored).
	entries Entries
	log     *slog.Logger
	events  *prometheus.CounterVec
}

// NewWebhook returns the webhook of the endpoint whose signing secret is
// secret; its metrics are registered on reg.
func NewWebhook(db *pgxpool.Pool, secret string, orders Orders, log *slog.Logger, reg prometheus.Registerer) *Webhook {
	w := &Webhook{db: db, secret: secret, orders: orders, log: log,
		events: metric.CounterVec("shop_payment_events_total",
			"Stripe webhook deliveries by event type and outcome: applied (its effect ran), repeat "+
				"(applied before), ignored (a type the shop does not apply), refused (bad signature or body), "+
				"failed (to be delivered again).", "type", "outcome")}
	reg.MustRegister(w.events)
	return w
}

// ForEntries makes the webhook (and reconcile) apply the events of draw
// entries' intents to entries.
func (w *Webhook) ForEntries(entries Entries) *Webhook {
	w.entries = entries
	return w
}

// Routes registers the webhook's route. It takes no Bearer: Stripe's
// signature is its authentication.
func (w *Webhook) Routes(r fiber.Router) {
	r.Post("/payments/stripe/webhook", w.receive)
}

var errSignature = apperr.NewError(apperr.CodeInvalidSignature,
	"the Stripe-Signature header is missing, wrong, or dated more than 5 minutes from the shop's clock")

// errTooNew is a signature whose time is ahead of ours beyond the tolerance.
var errTooNew = errors.New("timestamp is ahead of the clock beyond tolerance")

func (w *Webhook) receive(c *fiber.Ctx) error {
	body := bytes.Clone(c.Body())
	se, err := w.construct(body, c.Get("Stripe-Signature"), time.Now())
	switch {
	case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader),
		errors.Is(err, webhook.ErrNoValidSignature), errors.Is(err, webhook.ErrTooOld), errors.Is(err, errTooNew):
		w.count("", "refused")
		return errSignature
	case err != nil:
		w.count("", "refused")
		return apperr.Invalid(apperr.FieldError{Field: "body", Message: "is not a JSON Stripe event"})
	}
	e, err := parseEvent(se, body)
	if err != nil {
		w.count("", "refused")
		return apperr.Invalid(apperr.FieldError{Field: "body", Message: err.Error()})
	}
	if e == nil {
		w.count("other", "ignored")
		return c.JSON(fiber.Map{"received": true}) // a type we do not apply
	}
	if err := w.record(c.UserContext(), e); err != nil {
		w.count(e.Type, "failed")
		return w.unavailable("record payment event", err)
	}
	ran, err := w.apply(c.UserContext(), e.ID)
	switch {
	case err != nil:
		w.count(e.Type, "failed")
		return w.unavailable("apply payment event", err)
	case ran:
		w.count(e.Type, "applied")
	default:
		w.count(e.Type, "repeat")
	}
	return c.JSON(fiber.Map{"received": true})
}

// construct verifies a delivery's signature and reads its event.
// stripe-go refuses a signature older than the tolerance but not one from
// the future (its check is time.Since(t) > tolerance), so the future side
// is checked here, once the signature has proved that t is Stripe's.
func (w *Webhook) construct(body []byte, header string, now time.Time) (stripe.Event, error) {
	// Stripe sends each endpoint its events in the API version set for
	// the endpoint; the few fields read here are the same in all of them.
	se, err := webhook.ConstructEventWithOptions(body, header, w.secret,
		webhook.ConstructEventOptions{Tolerance: signatureTolerance, IgnoreAPIVersionMismatch: true})
	if err != nil {
		return se, err
	}
	if t, ok := signedAt(header); !ok || t.After(now.Add(signatureTolerance)) {
		return stripe.Event{}, errTooNew
	}
	return se, nil
}

// signedAt is the t= of a Stripe-Signature header, read as stripe-go reads
// it (the last t= wins), so that it is the time the signature covers.
func signedAt(header string) (time.Time, bool) {
	var t time.Time
	found := false
	for _, pair := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(pair, "t="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			t, found = time.Unix(n, 0), true
		}
	}
	return t, found
}

// event is the part of a Stripe event the webhook keeps.
type event struct {
	ID   string
	Type string
	raw  []byte
}

// parseEvent reads a signed event: nil for a type the webhook does not
// apply, an error for one that is not a Stripe event.
func parseEvent(se stripe.Event, body []byte) (*event, error) {
	if se.ID == "" || se.Type == "" || se.Data == nil || len(se.Data.Raw) == 0 {
		return nil, errors.New("not a Stripe event: id, type and data.object are required")
	}
	switch se.Type {
	case EventSucceeded, EventFailed, EventRefunded, EventCapturable, EventCanceled:
	default:
		return nil, nil
	}
	if _, err := effectOf(string(se.Type), se.Data.Raw); err != nil {
		return nil, err
	}
	return &event{ID: se.ID, Type: string(se.Type), raw: body}, nil
}

const (
	recordEventSQL = `
INSERT INTO payment_events (id, provider, type, payload) VALUES ($1, 'stripe', $2, $3)
ON CONFLICT (id) DO NOTHING`
	// A delivery claims an unapplied event for a while (a lease, not a
	// lock held in a transaction: see apply).
	claimEventSQL = `
UPDATE payment_events SET claimed_until = now() + make_interval(secs => $2)
WHERE id = $1 AND applied_at IS NULL AND (claimed_until IS NULL OR claimed_until < now())
RETURNING type, payload`
	eventAppliedSQL = `SELECT applied_at IS NOT NULL FROM payment_events WHERE id = $1`
	appliedSQL      = `UPDATE payment_events SET applied_at = now(), claimed_until = NULL WHERE id = $1`
	releaseSQL      = `UPDATE payment_events SET claimed_until = NULL WHERE id = $1 AND applied_at IS NULL`
	unappliedSQL    = `SELECT id FROM payment_events WHERE applied_at IS NULL AND received_at <= $1 ORDER BY received_at`
)

// record keeps the event, before its effect: committed on its own, so a
// crash during the effect leaves it there, unapplied.
func (w *Webhook) record(ctx context.Context, e *event) error {
	_, err := w.db.Exec(ctx, recordEventSQL, e.ID, e.Type, e.raw)
	return err
}

// apply runs event id's effect unless it has run, and tells whether this
// call ran it. A delivery claims the event for claimLease, runs the
// effect, and marks it applied; a concurrent delivery of the same event
// finds it claimed and looks again every lockRetry until it is applied
// (or its claim lapses: the holder died). No connection is held across
// the effect: the effect takes connections of its own from the same pool,
// and a lock held in a transaction meanwhile deadlocked the pool once as
// many deliveries as connections were in flight.
func (w *Webhook) apply(ctx context.Context, id string) (ran bool, _ error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), applyTimeout)
	defer cancel()
	for {
		var typ string
		var payload []byte
		err := w.db.QueryRow(ctx, claimEventSQL, id, claimLease.Seconds()).Scan(&typ, &payload)
		switch {
		case err == nil:
			return w.run(ctx, id, typ, payload)
		case !errors.Is(err, pgx.ErrNoRows):
			return false, err
		}
		var applied bool
		if err := w.db.QueryRow(ctx, eventAppliedSQL, id).Scan(&applied); err != nil || applied {
			return false, err
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("event %s is being applied by another delivery: %w", id, ctx.Err())
		case <-time.After(lockRetry):
		}
	}
}

// claimLease is how long a claim keeps other deliveries out: longer than
// an effect may take (applyTimeout), so a live holder never loses it.
const claimLease = 2 * applyTimeout

// lockRetry is how long a delivery waits before it looks again at an
// event another delivery has claimed.
const lockRetry = 20 * time.Millisecond

// run runs a claimed event's effect and marks it applied; an effect that
// fails gives the claim up, so that the next delivery may try at once.
func (w *Webhook) run(ctx context.Context, id, typ string, payload []byte) (bool, error) {
	err := w.effect(ctx, id, typ, payload)
	if err == nil {
		_, err = w.db.Exec(ctx, appliedSQL, id)
		return err == nil, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = w.db.Exec(rctx, releaseSQL, id) // else the claim lapses by itself
	return false, err
}

func (w *Webhook) effect(ctx context.Context, id, typ string, payload []byte) error {
	var se stripe.Event
	if err := json.Unmarshal(payload, &se); err != nil || se.Data == nil {
		return fmt.Errorf("event %s: not a Stripe event: %v", id, err)
	}
	eff, err := effectOf(typ, se.Data.Raw)
	if err != nil {
		return fmt.Errorf("event %s: %w", id, err)
	}
	return eff(ctx, w)
}

// ApplyPending applies the events recorded before since and never
// applied (a crash between record and effect, an effect that failed and
// was not delivered again). It returns how many it applied and the first
// error; one event's failure does not stop the others.
func (w *Webhook) ApplyPending(ctx context.Context, before time.Time) (applied int, err error) {
	rows, err := w.db.Query(ctx, unappliedSQL, before)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	var first error
	for _, id := range ids {
		if _, err := w.apply(ctx, id); err != nil {
			if first == nil {
				first = fmt.Errorf("event %s: %w", id, err)
			}
			continue
		}
		applied++
	}
	return applied, first
}

func (w *Webhook) unavailable(op string, err error) error {
	w.log.Warn(op, "err", err)
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return err
	}
	return fmt.Errorf("%s: %w: %w", op, apperr.Unavailable("payments are unavailable; deliver the event again"), err)
}

// effect is what an event does to the orders or the draw entries.
type effect func(ctx context.Context, w *Webhook) error

// effectOf reads an event's object: an intent for the payment_intent
// events, a charge for charge.refunded.
func effectOf(typ string, raw json.RawMessage) (effect, error) {
	switch typ {
	case EventSucceeded, EventFailed, EventCapturable, EventCanceled:
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(raw, &pi); err != nil || pi.ID == "" {
			return nil, errors.New("data.object is not a PaymentIntent")
		}
		in := intentOf(&pi)
		if in.EntryID != "" {
			return entryEffect(typ, in), nil
		}
		return func(ctx context.Context, w *Webhook) error {
			switch {
			case in.OrderID == "":
				w.log.Info("payment intent without metadata.order_id: not ours, ignored", "payment_ref", in.ID)
				return nil
			case typ == EventCapturable || typ == EventCanceled:
				return nil // an order's intent is captured at once: no hold to follow
			case typ == EventFailed:
				return w.orders.PaymentFailed(ctx, in.OrderID, in.Payment())
			}
			outcome, err := w.orders.PaymentSucceeded(ctx, in.OrderID, in.Payment())
			if err == nil {
				w.log.Info("payment intent succeeded", "order", in.OrderID, "payment_ref", in.ID, "outcome", outcome)
			}
			return err
		}, nil
	case EventRefunded:
		var ch stripe.Charge
		if err := json.Unmarshal(raw, &ch); err != nil || ch.ID == "" {
			return nil, errors.New("data.object is not a Charge")
		}
		if ch.PaymentIntent == nil || ch.PaymentIntent.ID == "" {
			return func(context.Context, *Webhook) error { return nil }, nil // not an intent's
		}
		return func(ctx context.Context, w *Webhook) error {
			return w.orders.PaymentRefunded(ctx, ch.PaymentIntent.ID, ch.AmountRefunded)
		}, nil
	}
	return nil, fmt.Errorf("event type %s is not applied", typ)
}

func (w *Webhook) count(typ, outcome string) { w.events.WithLabelValues(typ, outcome).Inc() }

// entryEffect applies an event of a draw entry's hold: its intent's
// status says what the hold became (a failed authorisation changes
// nothing: the entry stays authorizing, and the close loses it).
func entryEffect(typ string, in Intent) effect {
	return func(ctx context.Context, w *Webhook) error {
		if typ == EventFailed {
			return nil
		}
		if w.entries == nil {
			w.log.Info("payment intent of a draw entry, draws not served here: ignored", "payment_ref", in.ID)
			return nil
		}
		did, err := w.entries.HoldSeen(ctx, in.EntryID, in.Payment())
		if err == nil && did != "" {
			w.log.Info("draw entry's hold", "entry", in.EntryID, "payment_ref", in.ID, "outcome", did)
		}
		return err
	}
}
