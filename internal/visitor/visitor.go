// Package visitor counts who looks at the catalog: for every 200 of
// GET /api/v1/products/{sku}, one view and the visitor (the user id when
// the request bears a valid token, else the client IP as the rate limiter
// sees it) in a HyperLogLog, per product and UTC day and for the whole
// storefront (the seeds' unique-visitor pattern).
//
// The reasoning behind it is in docs/design/visitor.md.
package visitor

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/telemetry"
)

const (
	// retention is how long a day's counts are kept.
	retention = 400 * 24 * time.Hour
	// MaxDays is the longest range a report covers (docs/api.md).
	MaxDays = 92
	// defaultQueue is how many views may wait for Redis.
	defaultQueue = 10000
	// batchViews is the most views one pipeline carries.
	batchViews   = 64
	redisTimeout = 2 * time.Second
	dateLayout   = "2006-01-02"
	siteTag      = "*"
)

// errRedisDown: Redis did not answer a report.
var errRedisDown = apperr.Unavailable("the visitor counts are unreachable; retry shortly")

// Options configure a Service.
type Options struct {
	// Prefix starts every key.
	Prefix string
	// Exists tells whether the catalog has a product (reports on an
	// unknown one answer 404).
	Exists func(ctx context.Context, sku string) (bool, error)
	// ClientIP names a request's client as the rate limiter does.
	ClientIP func(c *fiber.Ctx) string
	// Queue is how many views may wait for Redis (default 10000).
	Queue int
}

// view is one counted product read.
type view struct {
	sku, visitor string
	at           time.Time
}

// Service counts views and reports them. Make it with New; run Run.
type Service struct {
	rdb   redis.UniversalClient
	o     Options
	queue chan view
	log   *slog.Logger
	m     *metrics
	now   func() time.Time
}

// New returns the service; views wait in its queue until Run drains them.
func New(rdb redis.UniversalClient, o Options, log *slog.Logger, reg prometheus.Registerer) *Service {
	if o.Queue <= 0 {
		o.Queue = defaultQueue
	}
	return &Service{rdb: rdb, o: o, queue: make(chan view, o.Queue), log: log, m: newMetrics(reg), now: time.Now}
}

// Count queues one view of sku by visitor, without waiting: when the
// queue is full the view is dropped (and counted as such).
func (s *Service) Count(sku, visitor string) {
	select {
	case s.queue <- view{sku: strings.Clone(sku), visitor: strings.Clone(visitor), at: s.now()}:
	default:
		s.m.dropped.WithLabelValues("queue_full").Inc()
	}
}

// Run writes queued views to Redis until ctx ends, then writes what is
// still queued (bounded by a second) and returns.
func (s *Service) Run(ctx context.Context) {
	for {
		select {
		case v := <-s.queue:
			s.write(context.WithoutCancel(ctx), s.batch(v))
		case <-ctx.Done():
			s.flush(context.WithoutCancel(ctx), time.Second)
			return
		}
	}
}

// flush writes everything queued now, giving up (and dropping) after d.
func (s *Service) flush(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		select {
		case v := <-s.queue:
			s.write(ctx, s.batch(v))
		default:
			return
		}
	}
}

// batch is first and what else is queued, up to batchViews.
func (s *Service) batch(first view) []view {
	b := []view{first}
	for len(b) < batchViews {
		select {
		case v := <-s.queue:
			b = append(b, v)
		default:
			return b
		}
	}
	return b
}

// dayCount is what a batch adds to one product's (or the storefront's)
// keys of one day.
type dayCount struct {
	tag, date string
	expire    time.Time
	visitors  []any // PFADD's members (a visitor seen twice counts once there)
	views     int64
}

// write records a batch in one pipelined round trip, with one PFADD,
// INCRBY and the two EXPIREATs per product and day however many views of
// it the batch holds: a hot product's reads, which is what a flash sale's
// page load is, cost Redis four commands a batch, not eight a read.
func (s *Service) write(ctx context.Context, views []view) {
	ctx, span := telemetry.Job(ctx, "visitor: write counts", attribute.Int("shop.views", len(views)))
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	for _, d := range tally(views) {
		hll, counter := s.hllKey(d.tag, d.date), s.viewsKey(d.tag, d.date)
		pipe.PFAdd(ctx, hll, d.visitors...)
		pipe.IncrBy(ctx, counter, d.views)
		pipe.ExpireAt(ctx, hll, d.expire)
		pipe.ExpireAt(ctx, counter, d.expire)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		s.m.dropped.WithLabelValues("redis_error").Add(float64(len(views)))
		s.log.Warn("visitor counts dropped", "views", len(views), "err", err)
		return
	}
	s.m.written.Add(float64(len(views)))
}

// tally sums a batch by product (and the storefront) and UTC day, in the
// order each was first viewed.
func tally(views []view) []*dayCount {
	var out []*dayCount
	index := map[[2]string]*dayCount{}
	for _, v := range views {
		date := v.at.UTC().Format(dateLayout)
		for _, tag := range []string{v.sku, siteTag} {
			d := index[[2]string{tag, date}]
			if d == nil {
				d = &dayCount{tag: tag, date: date, expire: dayOf(v.at).Add(retention)}
				index[[2]string{tag, date}] = d
				out = append(out, d)
			}
			d.views++
			d.visitors = append(d.visitors, v.visitor)
		}
	}
	return out
}

func (s *Service) hllKey(tag, date string) string {
	return s.o.Prefix + "visitors:{" + tag + "}:" + date
}

func (s *Service) viewsKey(tag, date string) string {
	return s.o.Prefix + "views:{" + tag + "}:" + date
}

// dayOf is midnight UTC of t's day.
func dayOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
