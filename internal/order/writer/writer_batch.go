package writer

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/outage"
)

// failure is a stream entry that could not be written, and why.
type failure struct {
	msg    redis.XMessage
	ev     *event // nil when the entry did not parse
	reason string
}

// parseBatch splits entries into events to write, transitions to record
// and entries that can never be written. An order id seen twice in the
// batch is written once; its other entries are returned as duplicates, to
// be acked with it.
func parseBatch(msgs []redis.XMessage) (events []event, transitions []Transition, failures []failure) {
	seen := make(map[uuid.UUID]bool, len(msgs))
	texts := itemsTexts{}
	for _, m := range msgs {
		if isTransition(m) {
			t, err := parseTransition(m)
			if err != nil {
				failures = append(failures, failure{msg: m, reason: err.Error()})
			} else {
				transitions = append(transitions, t)
			}
			continue
		}
		e, err := parseEventWith(m, texts)
		if err != nil {
			failures = append(failures, failure{msg: m, reason: err.Error()})
			continue
		}
		if seen[e.orderID] {
			continue
		}
		seen[e.orderID] = true
		events = append(events, e)
	}
	return events, transitions, failures
}

// duplicateIDs are the entries that are neither written events nor
// failures: repeats of an order id within the batch, and transitions
// (recorded by then).
func duplicateIDs(msgs []redis.XMessage, events []event, failures []failure) []string {
	known := make(map[string]bool, len(events)+len(failures))
	for _, e := range events {
		known[e.streamID] = true
	}
	for _, f := range failures {
		known[f.msg.ID] = true
	}
	var out []string
	for _, m := range msgs {
		if !known[m.ID] {
			out = append(out, m.ID)
		}
	}
	return out
}

func withoutFailures(events []event, bad []failure) []event {
	if len(bad) == 0 {
		return events
	}
	drop := make(map[string]bool, len(bad))
	for _, f := range bad {
		drop[f.msg.ID] = true
	}
	out := make([]event, 0, len(events))
	for _, e := range events {
		if !drop[e.streamID] {
			out = append(out, e)
		}
	}
	return out
}

// persistRetrying writes events, retrying transient database errors with
// backoff for as long as the writer runs, and returns the events it
// inserted (not those written before: a redelivery). A permanent error
// makes it write the events one by one, to find the ones that can never be
// written. The transaction in hand is not cut short by a stop: it runs on a
// context of its own.
func (w *Writer) persistRetrying(ctx context.Context, events []event) (written, recovered []event, bad []failure, err error) {
	if len(events) == 0 {
		return nil, nil, nil, nil
	}
	fresh, rec, perr := w.persistOnce(ctx, events)
	if perr == nil || !permanent(perr) {
		return fresh, rec, nil, perr // nil, a fault's error, or errGaveUp
	}
	w.m.errors.WithLabelValues("permanent").Inc()
	for _, e := range events {
		fresh, rec, perr := w.persistOnce(ctx, []event{e})
		switch {
		case perr == nil:
			written, recovered = append(written, fresh...), append(recovered, rec...)
		case permanent(perr):
			ev := e
			bad = append(bad, failure{msg: redis.XMessage{ID: e.streamID, Values: e.values}, ev: &ev, reason: perr.Error()})
		default: // a fault's error or errGaveUp
			return written, recovered, bad, perr
		}
	}
	return written, recovered, bad, nil
}

// persistOnce writes events, retrying only transient errors, and returns
// those it inserted; its error is a permanent one, a fault's, or errGaveUp
// when the writer stops while the database is unreachable.
//
// After a COMMIT whose answer was lost, the retry finds that COMMIT's rows
// already there and inserts nothing: it returns them as recovered, since
// they are (almost surely) this writer's own, and the after-commit hook
// would otherwise never see them. A row a claiming
// writer inserted meanwhile is handed over here too, so the hook's work
// must be idempotent per order id (the best-seller boards' is).
func (w *Writer) persistOnce(ctx context.Context, events []event) (fresh, recovered []event, err error) {
	ctx, span := persistSpan(ctx, events)
	defer func() { endSpan(span, len(fresh), err) }()
	b := newBackoff()
	uncertain := false // an earlier attempt's COMMIT may have committed
	for {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		fresh, existing, err := persist(tctx, w.db, events, w.faultBeforeCommit)
		cancel()
		if err == nil {
			if uncertain {
				recovered = existing
			}
			return fresh, recovered, nil
		}
		var hook hookError
		if errors.As(err, &hook) || permanent(err) {
			return nil, nil, err
		}
		var commit commitError
		uncertain = uncertain || errors.As(err, &commit)
		w.m.errors.WithLabelValues("transient").Inc()
		if outage.Is(err) {
			w.log.Warn("order writer: database unavailable, retrying", "err", err, "events", len(events))
		} else {
			w.log.Error("order writer: batch failed, not for an outage; retrying", "err", err, "events", len(events))
		}
		if ctx.Err() != nil || !b.wait(ctx) {
			return nil, nil, errGaveUp
		}
	}
}

// afterCommitAttempts bounds the retries of a failing after-commit hook: it
// runs while the batch waits for its XACK.
const afterCommitAttempts = 3

// afterCommit hands the orders just inserted to the hook, retrying a
// failure a few times; a hook that keeps failing is logged and counted, and
// the batch is acknowledged all the same (the orders are written).
func (w *Writer) afterCommit(ctx context.Context, written []event) {
	if w.o.AfterCommit == nil || len(written) == 0 {
		return
	}
	orders := make([]Persisted, len(written))
	for i, e := range written {
		orders[i] = e.persisted()
	}
	b := newBackoff()
	for attempt := 1; ; attempt++ {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := w.o.AfterCommit(hctx, orders)
		cancel()
		if err == nil {
			return
		}
		if attempt == afterCommitAttempts || !b.wait(ctx) {
			w.m.errors.WithLabelValues("after_commit").Inc()
			w.log.Error("order writer: after-commit hook failed; its work for these orders is lost",
				"err", err, "orders", len(orders), "first", orders[0].ID)
			return
		}
	}
}

// confirm acks the written entries (and repeats and transitions) and marks
// their orders confirmed, atomically (one script): a status never says
// pending for an order whose entry is acked. Only a pending status becomes
// confirmed: an order cancelled or expired before its row was written keeps
// its final state. On Redis trouble the entries stay pending and are
// delivered again, which writes nothing twice. On a cluster the buyers'
// pending indexes live in other slots: confirmSplit.
func (w *Writer) confirm(ctx context.Context, events []event, extra []string) error {
	if len(events) == 0 && len(extra) == 0 {
		return nil
	}
	if w.keys.Parts().Grouped() {
		return w.retryRedis(ctx, func(ctx context.Context) error { return w.confirmSplit(ctx, events, extra) })
	}
	// In chunks: Redis runs a script whole while purchases wait behind
	// it, and a batch of a thousand held it for milliseconds (BENCHMARKS.md,
	// issue 32). Each chunk acks only the entries whose orders it confirms.
	for len(events) > 0 || len(extra) > 0 {
		n := min(len(events), confirmOrders)
		if !w.confirmChunk(ctx, events[:n], extra) {
			return nil // stopping: the rest stay pending and come again
		}
		events, extra = events[n:], nil
	}
	return nil
}

// confirmOrders is the most orders one confirm script call handles: at
// ~10 µs an order, ~0.3 ms of Redis.
const confirmOrders = 32

// confirmChunk runs the confirm script for events and extra until it
// succeeds; false: the writer is stopping and they stay pending.
func (w *Writer) confirmChunk(ctx context.Context, events []event, extra []string) bool {
	keys := make([]string, 0, 1+2*len(events))
	args := make([]any, 0, 2+len(extra)+2*len(events))
	keys = append(keys, w.keys.Stream(w.part))
	args = append(args, group, len(extra)+len(events))
	for _, id := range extra {
		args = append(args, id)
	}
	for _, e := range events {
		args = append(args, e.streamID)
	}
	for _, e := range events {
		keys = append(keys, w.keys.Status(e.orderID.String()), w.keys.Pending(e.userID.String()))
		args = append(args, e.orderID.String())
	}
	b := newBackoff()
	for {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := confirmScript.Run(cctx, w.rdb, keys, args...).Err()
		cancel()
		if err == nil {
			return true
		}
		w.m.errors.WithLabelValues("redis").Inc()
		w.log.Warn("order writer: ack failed; the entries will be delivered again", "err", err)
		if ctx.Err() != nil || !b.wait(ctx) {
			return false
		}
	}
}

// confirmScript: KEYS[1] the stream, then per order its status and its
// buyer's pending index; ARGV[1] the group, ARGV[2] the number of entries
// to ack, those ids, then the order ids.
var confirmScript = redis.NewScript(`
local n = tonumber(ARGV[2])
local ids = {}
for i = 1, n do ids[i] = ARGV[2 + i] end
for i = 1, n, 1000 do
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ids, i, math.min(i + 999, n)))
end
for j = 1, (#KEYS - 1) / 2 do
  local status, pending, id = KEYS[2 * j], KEYS[2 * j + 1], ARGV[2 + n + j]
  if redis.call('HGET', status, 'status') == 'pending' then
    redis.call('HSET', status, 'status', 'confirmed')
  end
  redis.call('ZREM', pending, id)
end
return 0`)

// reject dead-letters the entries delivered MaxDeliveries times; the others
// are read again from our own pending list, which counts one more delivery.
func (w *Writer) reject(ctx context.Context, failures []failure) {
	for _, f := range failures {
		pend, err := w.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: w.keys.Stream(w.part), Group: group, Start: f.msg.ID, End: f.msg.ID, Count: 1,
		}).Result()
		if err != nil || len(pend) == 0 {
			continue // acked meanwhile, or Redis trouble: it comes back
		}
		if pend[0].RetryCount < int64(w.o.MaxDeliveries) {
			w.readOwn = true
			continue
		}
		w.deadLetter(ctx, f, pend[0].RetryCount)
	}
}

// deadLetter moves an entry to the dead-letter stream with its reason, acks
// it and marks its order rejected, in one MULTI (on a cluster, in the
// steps of deadLetterSplit). An entry that did not
// parse still names its order and buyer, most often: the order is marked
// rejected all the same, or its buyer would read "pending" until the
// status expires. One that names neither is kept whole in the dead-letter
// stream and counted apart: no buyer learns of it.
func (w *Writer) deadLetter(ctx context.Context, f failure, deliveries int64) {
	fields := map[string]any{"source_id": f.msg.ID, "reason": f.reason, "deliveries": deliveries}
	for k, v := range f.msg.Values {
		fields["event_"+k] = v
	}
	if f.ev == nil {
		if e, ok := parseOwner(f.msg); ok {
			f.ev = &e
		}
	}
	var err error
	if w.keys.Parts().Grouped() {
		err = w.deadLetterSplit(ctx, f, fields)
	} else {
		err = w.deadLetterTx(ctx, f, fields)
	}
	if err != nil {
		w.log.Warn("order writer: dead-letter failed; will retry", "id", f.msg.ID, "err", err)
		return
	}
	w.m.deadLetters.Inc()
	if f.ev == nil {
		w.m.unowned.Inc()
	}
	w.log.Error("order event dead-lettered", "id", f.msg.ID, "reason", f.reason, "deliveries", deliveries,
		"order_rejected", f.ev != nil)
}

// deadLetterTx is deadLetter's one MULTI on a single Redis.
func (w *Writer) deadLetterTx(ctx context.Context, f failure, fields map[string]any) error {
	_, err := w.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: w.keys.Dead(w.part), Values: fields})
		p.XAck(ctx, w.keys.Stream(w.part), group, f.msg.ID)
		if f.ev != nil {
			key := w.keys.Status(f.ev.orderID.String())
			p.HSet(ctx, key, "status", order.StatusRejected)
			p.PExpire(ctx, key, order.StatusTTL)
			p.ZRem(ctx, w.keys.Pending(f.ev.userID.String()), f.ev.orderID.String())
		}
		return nil
	})
	return err
}

// recordRetrying records the batch's transitions in PostgreSQL, retrying
// any error with backoff for as long as the writer runs (the rows are
// plain and idempotent: only an outage or a bug fails them). It returns
// errGaveUp when the writer stops first: the entries stay pending.
func (w *Writer) recordRetrying(ctx context.Context, ts []Transition) error {
	if len(ts) == 0 {
		return nil
	}
	ctx, span := transitionsSpan(ctx, ts)
	b := newBackoff()
	for {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err := recordTransitions(tctx, w.db, ts)
		cancel()
		if err == nil {
			w.m.transitions.Add(float64(len(ts)))
			span.End()
			return nil
		}
		w.m.errors.WithLabelValues("transient").Inc()
		w.log.Warn("order writer: transitions not recorded, retrying", "err", err, "transitions", len(ts))
		if ctx.Err() != nil || !b.wait(ctx) {
			endSpan(span, 0, errGaveUp)
			return errGaveUp
		}
	}
}

// afterTransition hands the recorded transitions to the hook, as
// afterCommit does the inserted orders.
func (w *Writer) afterTransition(ctx context.Context, ts []Transition) {
	if w.o.AfterTransition == nil || len(ts) == 0 {
		return
	}
	b := newBackoff()
	for attempt := 1; ; attempt++ {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := w.o.AfterTransition(hctx, ts)
		cancel()
		if err == nil {
			return
		}
		if attempt == afterCommitAttempts || !b.wait(ctx) {
			w.m.errors.WithLabelValues("after_transition").Inc()
			w.log.Error("order writer: after-transition hook failed; its work for these orders is lost",
				"err", err, "transitions", len(ts), "first", ts[0].OrderID)
			return
		}
	}
}
