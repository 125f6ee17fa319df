// Package sweeper expires the orders not paid by their expires_at and
// finishes the releases a stop left owed (a cross-shard order's): it
// claims what is due in small batches under a lease, and leaves each
// order's step to internal/order (order.Expiry), whose guard makes it
// happen once. On a cluster every sweep also runs the saga repair.
//
// The reasoning behind it is in docs/design/sweeper.md.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/metric"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/telemetry"
)

// Options tune the sweeper; zero values take the defaults.
type Options struct {
	// Batch is how many due orders one claim takes (default 100).
	Batch int
	// Interval is how long the sweeper waits when nothing is due, and how
	// often an instance without the lock tries for it (default 1s).
	Interval time.Duration
	// Lease is how long a claimed order stays out of other sweepers' reach
	// (default 30s): a sweeper that dies with claimed orders leaves them to
	// the next one after that.
	Lease time.Duration
	// Locks, when set, lets one sweeper at a time work (an efficiency
	// measure only: two sweepers at once still expire each order once).
	Locks *lock.Locker
	// Sagas, on a Redis Cluster, settles the sagas a crash left between
	// hold and commit (internal/order/saga): every Sweep runs it after the
	// due orders.
	Sagas Repairer
}

// A Repairer settles the stale work of a cluster's sagas, with the
// sweeper's claims (Sweeper.ClaimEach).
type Repairer interface {
	Repair(ctx context.Context, s *Sweeper) (int, error)
}

func (o *Options) defaults() {
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
}

// sweeperLock is the name of the sweepers' lock, and sweeperLockTTL its
// lifetime (kept extended while held).
const (
	sweeperLock    = "order-sweeper"
	sweeperLockTTL = 10 * time.Second
)

// Sweeper expires the orders not paid by their expires_at: the units go
// back once, exactly as a cancellation gives them.
//
// Due orders sit in a sorted set by expires_at (the reserve script adds
// them; paying removes them). A claim (one script) takes a small batch of
// those due by Redis's clock and pushes them Lease into the future, so
// concurrent sweepers take different orders; each claimed order is then
// expired by the guarded release, which is what makes it happen once
// whoever else (another sweeper, a cancel, a payment) gets there too. A
// sweeper that dies between the claim and the release leaves the order to
// be claimed again after the lease; one that dies after the release left
// the transition event in the stream in the same step, for the writer.
type Sweeper struct {
	x   *order.Expiry
	rdb redis.UniversalClient
	o   Options
	log *slog.Logger
	m   *sweeperMetrics

	// faultAfterClaim, for tests, stops a sweep right after a claim, as a
	// crash would.
	faultAfterClaim func() error
}

// New returns the sweeper of the orders under prefix; its metrics are
// registered on reg.
func New(rdb redis.UniversalClient, stock *inventory.Stock, prefix string, log *slog.Logger,
	reg prometheus.Registerer, o Options) *Sweeper {
	o.defaults()
	return &Sweeper{x: order.NewExpiry(rdb, stock, prefix, log), rdb: rdb, o: o, log: log, m: newSweeperMetrics(reg)}
}

// InjectClaimFault makes every sweep stop right after a claim with
// f's error when f returns one, as a crash would (tests only).
func (s *Sweeper) InjectClaimFault(f func() error) { s.faultAfterClaim = f }

// Run sweeps until ctx is cancelled: under the lock when one is set (the
// instance holding it sweeps, the others try again every Interval).
func (s *Sweeper) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		var err error
		if s.o.Locks == nil {
			err = s.loop(ctx)
		} else {
			err = s.o.Locks.Run(ctx, sweeperLock, sweeperLockTTL, s.loop)
		}
		if err != nil && !errors.Is(err, lock.ErrBusy) && ctx.Err() == nil {
			s.log.Warn("order sweeper", "err", err)
		}
		s.rest(ctx)
	}
	return nil
}

// loop sweeps while ctx lasts, resting Interval when nothing was due.
func (s *Sweeper) loop(ctx context.Context) error {
	for ctx.Err() == nil {
		n, err := s.Sweep(ctx)
		if err != nil {
			return err
		}
		s.finishOwed(ctx)
		if n == 0 {
			s.rest(ctx)
		}
	}
	return nil
}

// Sweep expires the orders due now in every partition's due set, batch by
// batch, and returns how many it expired. Orders it finds paid, cancelled
// or gone it drops from the due set. It returns the first Redis error
// (what was expired stays so).
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	expired := 0
	var lag float64 // the most of this sweep's claims, over the partitions
	defer func() { s.m.lag.Set(lag) }()
	for p := range s.x.Partitions().Count() {
		n, err := s.sweepPartition(ctx, p, &lag)
		expired += n
		if err != nil {
			return expired, err
		}
	}
	if s.o.Sagas != nil {
		if _, err := s.o.Sagas.Repair(ctx, s); err != nil {
			return expired, err
		}
	}
	return expired, nil
}

func (s *Sweeper) sweepPartition(ctx context.Context, p int, lag *float64) (int, error) {
	expired := 0
	for {
		ids, err := s.claim(ctx, p, lag)
		if err != nil {
			return expired, err
		}
		if s.faultAfterClaim != nil {
			if err := s.faultAfterClaim(); err != nil {
				return expired, err
			}
		}
		n, err := claimed(ctx, "order sweeper: expire orders", p, ids, func(ctx context.Context, id string) (bool, error) {
			return s.expire(ctx, p, id)
		})
		expired += n
		if err != nil {
			return expired, err
		}
		if len(ids) < s.o.Batch {
			return expired, nil
		}
	}
}

// claimed runs each on the ids a claim of partition p took, as one job
// named name (telemetry.Job: the calls it makes are its span's
// children), and counts the ids each reports done. A claim that took
// none is a tick with no work: it starts no trace.
func claimed(ctx context.Context, name string, p int, ids []string,
	each func(ctx context.Context, id string) (bool, error)) (done int, err error) {
	if len(ids) == 0 {
		return 0, nil
	}
	ctx, span := telemetry.Job(ctx, name, attribute.Int("shop.partition", p), attribute.Int("shop.claimed", len(ids)))
	defer func() {
		span.SetAttributes(attribute.Int("shop.done", done))
		telemetry.End(span, err)
	}()
	for _, id := range ids {
		ok, err := each(ctx, id)
		if err != nil {
			return done, err
		}
		if ok {
			done++
		}
	}
	return done, nil
}

// ClaimEach claims up to Batch members of key, partition p's index by
// deadline, whose time has come, moving them Lease on as the due orders
// are, and runs each on them as one job named name (claimed). more is
// true when the batch was full: more may be due.
func (s *Sweeper) ClaimEach(ctx context.Context, name string, p int, key string,
	each func(ctx context.Context, id string) (bool, error)) (done int, more bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	reply, err := claimScript.Run(cctx, s.rdb, []string{key}, s.o.Batch, s.o.Lease.Milliseconds()).StringSlice()
	cancel()
	if err != nil || len(reply) < 2 {
		return 0, false, fmt.Errorf("claim %s: %w", key, err)
	}
	done, err = claimed(ctx, name, p, reply[2:], each)
	return done, len(reply)-2 >= s.o.Batch, err
}

// claimTimeout bounds each claim.
const claimTimeout = 2 * time.Second

// claimScript takes up to ARGV[1] orders of the due set KEYS[1] whose time
// has come by Redis's clock and moves them ARGV[2] ms on (the lease).
// Returns {now_ms, score of the oldest claimed, id...}.
var claimScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local out = {string.format('%d', now), due[2] or string.format('%d', now)}
for i = 1, #due, 2 do
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), due[i])
  out[#out + 1] = due[i]
end
return out`)

func (s *Sweeper) claim(ctx context.Context, p int, lag *float64) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	reply, err := claimScript.Run(cctx, s.rdb, []string{s.x.DueKey(p)}, s.o.Batch, s.o.Lease.Milliseconds()).StringSlice()
	if err != nil || len(reply) < 2 {
		return nil, fmt.Errorf("claim due orders: %w", err)
	}
	now, _ := strconv.ParseFloat(reply[0], 64)
	oldest, _ := strconv.ParseFloat(reply[1], 64)
	*lag = max(*lag, max(now-oldest, 0)/1000)
	return reply[2:], nil
}

// expire expires one claimed order (order.Expiry), counting it.
func (s *Sweeper) expire(ctx context.Context, p int, id string) (bool, error) {
	units, ok, err := s.x.Expire(ctx, p, id)
	if ok {
		s.m.expired.Inc()
		s.m.units.Add(float64(units))
	}
	return ok, err
}

// rest waits Interval, or until ctx is done. (time.After's timer is
// collected when it fires or is dropped, since Go 1.23.)
func (s *Sweeper) rest(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(s.o.Interval):
	}
}

type sweeperMetrics struct {
	expired prometheus.Counter
	units   prometheus.Counter
	lag     prometheus.Gauge
}

func newSweeperMetrics(reg prometheus.Registerer) *sweeperMetrics {
	m := &sweeperMetrics{
		expired: metric.Counter("shop_order_expired_total", "Orders this sweeper expired (not paid by expires_at)."),
		units:   metric.Counter("shop_order_expired_units_total", "Units the orders this sweeper expired gave back to stock."),
		lag:     metric.Gauge("shop_order_sweep_lag_seconds", "How late the oldest due order was when last claimed (0: none due)."),
	}
	reg.MustRegister(m.expired, m.units, m.lag)
	return m
}
