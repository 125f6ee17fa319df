package writer

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/order/ledger"
)

//go:embed trim.lua
var trimLua string

var trimScript = redis.NewScript(trimLua)

//go:embed forget.lua
var forgetLua string

var forgetScript = redis.NewScript(forgetLua)

// housekeep, every few seconds: sample the stream metrics, trim what is
// written and forget dead consumers, in every partition (one loop of the
// writer does it for all). Failures only cost a sample; they are logged at
// debug level.
func (w *Writer) housekeep(ctx context.Context) {
	if w.noHousekeep || time.Since(w.lastHousekeep) < w.o.Housekeeping {
		return
	}
	w.lastHousekeep = time.Now()
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.sample(hctx); err != nil {
		w.log.Debug("order writer: metrics sample", "err", err)
	}
	if _, err := w.Trim(hctx); err != nil {
		w.log.Debug("order writer: trim", "err", err)
	}
	for p := range w.keys.Parts().Count() {
		if gone, err := w.forgetConsumers(hctx, p); err != nil {
			w.log.Debug("order writer: forget idle consumers", "partition", p, "err", err)
		} else if len(gone) > 0 {
			w.log.Info("order writer: removed idle consumers holding nothing from the group",
				"partition", p, "consumers", gone)
		}
	}
}

// forgetConsumers removes from the group the consumers other than this
// process's own that hold no pending entry and have been idle for
// ForgetIdle (XGROUP DELCONSUMER); it returns their names. A consumer that
// still holds entries stays until another writer has claimed them. A live
// one can be removed too: a follower loop waiting for a backlog (backlog.go)
// reads nothing for as long as the rate stays moderate. Its next read adds
// it back, losing nothing: it held nothing.
func (w *Writer) forgetConsumers(ctx context.Context, p int) ([]string, error) {
	args := []any{group, w.o.ForgetIdle.Milliseconds()}
	for _, name := range w.own {
		args = append(args, name)
	}
	return forgetScript.Run(ctx, w.rdb, []string{w.keys.Stream(p)}, args...).StringSlice()
}

// Trim removes the stream entries every group has acknowledged, never one
// that is pending or not yet delivered, in every partition, and on a
// cluster the releases logs' entries older than ledger.SettledRetention (by a
// master's clock: the audit reads only entries newer than its snapshot).
// It returns how many it removed; on an error, what was removed before.
func (w *Writer) Trim(ctx context.Context) (int64, error) {
	var total int64
	for p := range w.keys.Parts().Count() {
		n, err := trimScript.Run(ctx, w.rdb, []string{w.keys.Stream(p)}).Int64()
		if err != nil {
			return total, err
		}
		total += n
	}
	if !w.keys.Parts().Grouped() {
		return total, nil
	}
	now, err := w.rdb.Time(ctx).Result()
	if err != nil {
		return total, err
	}
	minID := fmt.Sprintf("%d-0", now.Add(-ledger.SettledRetention).UnixMilli())
	for p := range w.keys.Parts().Count() {
		n, err := w.rdb.XTrimMinID(ctx, w.keys.Releases(p), minID).Result()
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// sample sets the stream gauges over every partition: length and pending
// entries summed, and the lag (the age of the oldest entry not yet
// written, pending or undelivered) of the partition furthest behind.
func (w *Writer) sample(ctx context.Context) error {
	var length, pending int64
	var lag time.Duration
	for p := range w.keys.Parts().Count() {
		s, err := w.samplePartition(ctx, w.keys.Stream(p))
		if err != nil {
			return err
		}
		length, pending, lag = length+s.length, pending+s.pending, max(lag, s.lag)
	}
	w.m.streamLen.Set(float64(length))
	w.m.pending.Set(float64(pending))
	w.m.lag.Set(lag.Seconds())
	return nil
}

type streamSample struct {
	length, pending int64
	lag             time.Duration
}

func (w *Writer) samplePartition(ctx context.Context, stream string) (streamSample, error) {
	var s streamSample
	n, err := w.rdb.XLen(ctx, stream).Result()
	if err != nil {
		return s, err
	}
	s.length = n
	groups, err := w.rdb.XInfoGroups(ctx, stream).Result()
	if err != nil || len(groups) == 0 {
		return s, err
	}
	pend, err := w.rdb.XPending(ctx, stream, group).Result()
	if err != nil {
		return s, err
	}
	s.pending = pend.Count
	oldest := ""
	if pend.Count > 0 {
		oldest = pend.Lower
	} else if msgs, err := w.rdb.XRangeN(ctx, stream, "("+groups[0].LastDeliveredID, "+", 1).Result(); err == nil && len(msgs) > 0 {
		oldest = msgs[0].ID
	}
	s.lag = idAge(oldest)
	return s, nil
}

// idAge is how long ago a stream id was made (its first part is Unix ms).
func idAge(id string) time.Duration {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return 0
	}
	t, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return 0
	}
	return max(time.Since(time.UnixMilli(t)), 0)
}
