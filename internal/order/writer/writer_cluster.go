package writer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/order"
)

// The writer's acknowledgements on a Redis Cluster.
// More in docs/design/writer.md ("writer_cluster.go").

// confirmLocalScript: KEYS[1] the stream, then the statuses in its slot;
// ARGV[1] the group, then the entry ids to ack.
var confirmLocalScript = redis.NewScript(`
for i = 2, #ARGV, 1000 do
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
for j = 2, #KEYS do
  if redis.call('HGET', KEYS[j], 'status') == 'pending' then
    redis.call('HSET', KEYS[j], 'status', 'confirmed')
  end
end
return 0`)

// confirmStatusScript confirms the pending status KEYS[1].
var confirmStatusScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'status') == 'pending' then
  redis.call('HSET', KEYS[1], 'status', 'confirmed')
end
return 0`)

// confirmSplit is confirm on a cluster (see above).
func (w *Writer) confirmSplit(ctx context.Context, events []event, extra []string) error {
	if len(events) > 0 {
		pipe := w.rdb.Pipeline()
		for _, e := range events {
			pipe.ZRem(ctx, w.keys.Pending(e.userID.String()), e.orderID.String())
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("pending indexes: %w", err)
		}
	}
	if w.faultBetweenAcks != nil {
		if err := w.faultBetweenAcks(); err != nil {
			return hookError{err}
		}
	}
	keys := []string{w.keys.Stream(w.part)}
	args := make([]any, 0, 1+len(extra)+len(events))
	args = append(args, group)
	for _, id := range extra {
		args = append(args, id)
	}
	for _, e := range events {
		args = append(args, e.streamID)
	}
	for _, e := range events {
		id := e.orderID.String()
		if w.keys.Parts().Home(id) == w.part {
			keys = append(keys, w.keys.Status(id))
			continue
		}
		if err := confirmStatusScript.Run(ctx, w.rdb, []string{w.keys.Status(id)}).Err(); err != nil {
			return fmt.Errorf("confirm order %s: %w", id, err)
		}
	}
	return confirmLocalScript.Run(ctx, w.rdb, keys, args...).Err()
}

// retryRedis runs step until it succeeds, with backoff, for as long as the
// writer runs; each try has 5 s and is not cut short by a stop. A stop
// returns nil: the batch's entries stay pending and are delivered again,
// which writes nothing twice.
func (w *Writer) retryRedis(ctx context.Context, step func(context.Context) error) error {
	b := newBackoff()
	for {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := step(cctx)
		cancel()
		var hook hookError
		if err == nil || errors.As(err, &hook) {
			return err // done, or a test's stop
		}
		w.m.errors.WithLabelValues("redis").Inc()
		w.log.Warn("order writer: ack failed; the entries will be delivered again", "err", err)
		if ctx.Err() != nil || !b.wait(ctx) {
			return nil
		}
	}
}

// rejectLua marks the status hash key rejected, for ttl ms, unless it holds
// a final status (paid, cancelled, expired, refunded): an order whose units went back
// must keep saying so, and the owed step (owed.go) goes by it.
const rejectLua = `
local function reject(key, ttl)
  local st = redis.call('HGET', key, 'status')
  if st ~= 'paid' and st ~= 'cancelled' and st ~= 'expired' and st ~= 'refunded' then
    redis.call('HSET', key, 'status', 'rejected')
    redis.call('PEXPIRE', key, ttl)
  end
end
`

// rejectStatusScript: KEYS[1] the status, ARGV[1] its TTL (ms).
var rejectStatusScript = redis.NewScript(rejectLua + `
reject(KEYS[1], ARGV[1])
return 0`)

// deadLetterScript: KEYS[1] the stream, KEYS[2] its dead letters, KEYS[3]
// the order's status in their slot (touched only when ARGV[1] ~= '0');
// ARGV[1] the status TTL (ms), ARGV[2] the group, ARGV[3] the entry id,
// then the dead letter's field-value pairs.
var deadLetterScript = redis.NewScript(rejectLua + `
redis.call('XADD', KEYS[2], '*', unpack(ARGV, 4))
redis.call('XACK', KEYS[1], ARGV[2], ARGV[3])
if ARGV[1] ~= '0' then reject(KEYS[3], ARGV[1]) end
return 0`)

// deadLetterSplit is deadLetter on a cluster: the buyer's pending index
// first (its own slot), then the dead letter, the ack and the rejected
// status in one script in the partition's slot (a status outside it, on
// its own before). A stop in between leaves the entry pending: it is
// delivered again and dead-lettered then. Unlike the single Redis's MULTI
// it keeps a final status (rejectLua).
func (w *Writer) deadLetterSplit(ctx context.Context, f failure, fields map[string]any) error {
	stream := w.keys.Stream(w.part)
	status, ttl := stream+":nostatus", "0"
	if f.ev != nil {
		id := f.ev.orderID.String()
		if err := w.rdb.ZRem(ctx, w.keys.Pending(f.ev.userID.String()), id).Err(); err != nil {
			return fmt.Errorf("pending index: %w", err)
		}
		status, ttl = w.keys.Status(id), fmt.Sprint(order.StatusTTL.Milliseconds())
		if w.keys.Parts().Home(id) != w.part {
			if err := rejectStatusScript.Run(ctx, w.rdb, []string{status}, ttl).Err(); err != nil {
				return fmt.Errorf("reject order %s: %w", id, err)
			}
			status, ttl = stream+":nostatus", "0"
		}
	}
	args := make([]any, 0, 3+2*len(fields))
	args = append(args, ttl, group, f.msg.ID)
	for k, v := range fields {
		args = append(args, k, v)
	}
	return deadLetterScript.Run(ctx, w.rdb, []string{stream, w.keys.Dead(w.part), status}, args...).Err()
}
