package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/shop-oss/shop/internal/keyspace"
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/orderkey"
	"github.com/shop-oss/shop/internal/telemetry"
)

// Options tune the order writer; zero values take the defaults.
type Options struct {
	// Consumer is this writer's name in the group. It must be unique among
	// running writers; a writer restarted under the same name first finishes
	// the entries it had been delivered. Default: hostname-pid.
	Consumer string
	// Batch is the most entries read, and written in one transaction.
	Batch int
	// Block is how long a read waits for new entries; it is kept shorter
	// than the client's read timeout so an idle writer never times out.
	Block time.Duration
	// ClaimIdle is how long an entry must sit unacknowledged in another
	// consumer's list before this writer takes it over (XAUTOCLAIM). It must
	// exceed the slowest batch, or live writers steal each other's work
	// (harmless, thanks to ON CONFLICT, but wasted).
	ClaimIdle time.Duration
	// MaxDeliveries is how often an entry that cannot be written is tried
	// before it goes to the dead-letter stream.
	MaxDeliveries int
	// Housekeeping is how often the writer samples its metrics, trims
	// the stream below the oldest entry not yet written and forgets dead
	// consumers.
	Housekeeping time.Duration
	// ForgetIdle is how long another consumer of the group must have been
	// idle, holding no pending entry, before housekeeping removes it (a
	// writer that died or was restarted under a new name). Default 10m.
	ForgetIdle time.Duration
	// Concurrency is how many batches may be in flight at once: that many
	// consumer loops, named Consumer-1 … Consumer-n when more than one.
	// While one loop waits for PostgreSQL another reads, parses and
	// acknowledges; only their sold-count updates of the same sale round
	// wait for each other (a row lock, taken last). The loops after the
	// first read new entries only while the stream is behind (a read came
	// back with a full Batch), so a moderate rate is still written by one
	// loop, in batches as large as it gathers (backlog.go). Default 1.
	Concurrency int
	// Linger is how long a loop that read less than a full batch waits,
	// counted from that read, before it reads again: at a moderate rate
	// the loops would otherwise write a transaction per handful of
	// orders, and PostgreSQL's cost per transaction (its commit, the
	// sold-count row) is then most of the writer's (BENCHMARKS.md). A
	// full batch (a backlog) is followed at once, and the first order
	// after a quiet spell is written as soon as it arrives: the wait adds
	// at most Linger to the persistence lag of the orders that come
	// during it. Default 0: read again at once; the commands set 50 ms,
	// since each commit's flush also delays Redis's fsyncs on a shared
	// disk (BENCHMARKS.md).
	Linger time.Duration
	// AfterCommit, when set, is called with the orders a transaction
	// actually inserted, after COMMIT and before XACK: never for an entry
	// redelivered after its row was written, so work hung on it (best-seller
	// counts, notifications) sees each order once. One exception: after a
	// COMMIT whose answer was lost, the retry hands over the rows it found
	// (that COMMIT's), so the hook must be idempotent per order id. A
	// crash between COMMIT and the hook loses that batch's hook work (the
	// redelivery inserts nothing); derived data has its rebuild. A failure is retried a
	// few times, then logged and counted; the orders stay written and are
	// acknowledged all the same (the hook must not hold up orders, and an
	// entry delivered again would not call it again). Loops of a concurrent
	// writer call it concurrently.
	AfterCommit func(ctx context.Context, orders []Persisted) error
	// AfterTransition, when set, is called with the batch's transitions
	// (paid, cancelled, expired) once they are recorded, before XACK. A
	// transition delivered again is handed to it again, so it must be
	// idempotent per order (the best-seller boards' TakeBack is). Failures
	// are handled as AfterCommit's.
	AfterTransition func(ctx context.Context, transitions []Transition) error
	// Partitions are the order stream's partitions (the zero value: one,
	// the stream of before partitions). They must be the serving
	// instances' (their Stock's): a writer reads every partition, each
	// with its own consumer group, Concurrency loops per partition.
	Partitions keyspace.Partitions
}

func (o *Options) defaults() {
	if o.Consumer == "" {
		host, _ := os.Hostname()
		o.Consumer = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.Block <= 0 {
		o.Block = time.Second
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = 30 * time.Second
	}
	if o.MaxDeliveries <= 0 {
		o.MaxDeliveries = 5
	}
	if o.Housekeeping <= 0 {
		o.Housekeeping = 2 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.ForgetIdle <= 0 {
		o.ForgetIdle = 10 * time.Minute
	}
}

// Persisted is an order the writer inserted, as the after-commit hook
// sees it.
type Persisted struct {
	ID         string
	UserID     string
	CreatedAt  time.Time
	TotalCents int64
	Items      []order.ReservedItem
}

// Writer persists the order stream to PostgreSQL.
type Writer struct {
	db   beginner
	rdb  redis.UniversalClient
	keys orderkey.Keys
	log  *slog.Logger
	o    Options
	m    *writerMetrics

	part          int      // the partition this loop reads
	own           []string // the consumer names of this process (in each partition's group)
	readOwn       bool     // re-read our own pending entries before new ones
	lastClaim     time.Time
	lastHousekeep time.Time
	noHousekeep   bool // a sibling loop does it
	// pace is shared by the loops of a partition (nil for the lone loop
	// of Concurrency 1 on one stream); follower loops (all but the first)
	// read new entries only while it says the stream is behind.
	pace     *backlog
	follower bool

	// Fault injection for tests: a non-nil error stops Run right there, as
	// a crash would: just before COMMIT, or after COMMIT and the
	// after-commit hook but before XACK.
	faultBeforeCommit func() error
	faultAfterCommit  func() error
	// faultBetweenAcks, for tests: on a cluster, a stop after the pending
	// indexes and before the ack (confirmSplit).
	faultBetweenAcks func() error
}

// New returns a writer of the order stream under prefix into db; its
// metrics are registered on reg. It needs nothing of the order Service:
// `shop writer` builds only this.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, prefix string, log *slog.Logger,
	reg prometheus.Registerer, o Options) *Writer {
	o.defaults()
	w := &Writer{db: db, rdb: rdb, keys: orderkey.New(prefix, o.Partitions), log: log, o: o, m: newWriterMetrics(reg)}
	w.own = []string{o.Consumer}
	if o.Concurrency > 1 {
		w.own = w.own[:0]
		for i := range o.Concurrency {
			w.own = append(w.own, siblingName(o.Consumer, i))
		}
	}
	return w
}

// InjectFaults sets what the writer calls just before each COMMIT and
// just after it (and the after-commit hook), before XACK: the fault
// drills' crash points (`shop writer --fault`). A non-nil error stops Run
// there as a crash would; a function may as well end or stop the process
// itself. Call it before Run.
func (w *Writer) InjectFaults(beforeCommit, afterCommit func() error) {
	w.faultBeforeCommit, w.faultAfterCommit = beforeCommit, afterCommit
}

// InjectAckFault sets what the writer calls on a Redis Cluster between
// its two acknowledgement steps (confirmSplit): the buyers' pending
// indexes done, the ack and the statuses not. A non-nil error stops Run
// there as a crash would. Call it before Run.
func (w *Writer) InjectAckFault(betweenAcks func() error) { w.faultBetweenAcks = betweenAcks }

// Run writes orders until ctx is cancelled; the batches in hand when it is
// cancelled are finished first. It returns an error only when a group
// cannot be created or a test hook stops it (which stops every loop).
//
// Each partition is a stream with its own consumer group: the writer runs
// Concurrency loops on each, under the same consumer names in every group.
// Exactly-once holds per partition as it did for the one stream (an entry
// is acknowledged only after its row is committed, a redelivery inserts
// nothing), and an order's events all go to one partition (its home), so
// its transitions follow it there in order.
func (w *Writer) Run(ctx context.Context) error {
	for p := range w.keys.Parts().Count() {
		if err := w.ensureGroup(ctx, p); err != nil {
			if ctx.Err() != nil {
				return nil // stopped before it started: nothing in hand
			}
			return err
		}
	}
	if w.o.Concurrency == 1 && w.keys.Parts().Count() == 1 {
		return w.loop(ctx)
	}
	g, gctx := errgroup.WithContext(ctx)
	for p := range w.keys.Parts().Count() {
		pace := newBacklog()
		for i := range w.o.Concurrency {
			sib := w.sibling(p, i)
			sib.pace, sib.follower = pace, i > 0
			g.Go(func() error { return sib.loop(gctx) })
		}
	}
	return g.Wait()
}

// sibling is loop i of partition p: a consumer of its own with its own
// read state, sharing the metrics; only the first loop of partition 0
// housekeeps (every partition).
func (w *Writer) sibling(p, i int) *Writer {
	sib := &Writer{db: w.db, rdb: w.rdb, keys: w.keys, log: w.log, o: w.o, m: w.m, own: w.own,
		part: p, noHousekeep: p > 0 || i > 0,
		faultBeforeCommit: w.faultBeforeCommit, faultAfterCommit: w.faultAfterCommit,
		faultBetweenAcks: w.faultBetweenAcks}
	if w.o.Concurrency > 1 {
		sib.o.Consumer = siblingName(w.o.Consumer, i)
	}
	return sib
}

func siblingName(consumer string, i int) string { return fmt.Sprintf("%s-%d", consumer, i+1) }

// loop is one consumer: read, write, acknowledge, until ctx is cancelled.
func (w *Writer) loop(ctx context.Context) error {
	w.readOwn = true
	w.log.Info("order writer started", "consumer", w.o.Consumer, "partition", w.part)
	b := newBackoff()
	for ctx.Err() == nil {
		read := time.Now()
		msgs, fresh, err := w.next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.redisTrouble(ctx, "read", err, b)
			}
			// A read whose reply was lost (a timeout, a reset connection)
			// may have delivered entries to us all the same: read our own
			// pending entries first, or they would wait for ClaimIdle.
			w.readOwn = true
			continue
		}
		b.reset()
		if w.pace != nil && fresh {
			// Only a read of new entries says whether the stream is
			// behind: not a retry of our own, nor a claim.
			w.pace.saw(len(msgs), w.o.Batch)
		}
		if len(msgs) > 0 {
			if err := w.handle(ctx, msgs); err != nil {
				return err
			}
		}
		w.housekeep(ctx)
		if w.o.Linger > 0 && len(msgs) > 0 && len(msgs) < w.o.Batch && !w.readOwn {
			sleep(ctx, w.o.Linger-time.Since(read))
		}
	}
	w.log.Info("order writer stopped", "consumer", w.o.Consumer)
	return nil
}

func (w *Writer) ensureGroup(ctx context.Context, p int) error {
	err := w.rdb.XGroupCreateMkStream(ctx, w.keys.Stream(p), group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group: %w", err)
	}
	return nil
}

// redisTrouble logs a Redis error and waits before the next try. A lost
// group (Redis restarted without its data) is recreated.
func (w *Writer) redisTrouble(ctx context.Context, op string, err error, b *backoff) {
	w.m.errors.WithLabelValues("redis").Inc()
	w.log.Warn("order writer: redis", "op", op, "err", err)
	if strings.HasPrefix(err.Error(), "NOGROUP") {
		_ = w.ensureGroup(ctx, w.part)
	}
	b.wait(ctx)
}

// next returns the entries to handle now: first our own pending ones (after
// a restart, or while one awaits another try), then those another consumer
// left idle too long, then new ones; fresh says they are new ones (a
// read of XREADGROUP '>'). A follower loop waits for a backlog before the
// last two.
func (w *Writer) next(ctx context.Context) ([]redis.XMessage, bool, error) {
	if w.readOwn {
		msgs, err := w.read(ctx, "0", -1)
		if err != nil || len(msgs) > 0 {
			return msgs, false, err
		}
		w.readOwn = false
	}
	if w.follower {
		// Its own pending entries are done: others only while the stream
		// is behind.
		w.pace.wait(ctx)
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
	}
	if time.Since(w.lastClaim) >= w.o.ClaimIdle/2 {
		w.lastClaim = time.Now()
		msgs, _, err := w.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: w.keys.Stream(w.part), Group: group, Consumer: w.o.Consumer,
			MinIdle: w.o.ClaimIdle, Start: "0-0", Count: int64(w.o.Batch),
		}).Result()
		if err != nil || len(msgs) > 0 {
			return msgs, false, err
		}
	}
	block := w.o.Block
	if w.follower {
		// Without BLOCK: when the backlog is gone it stops at once, rather
		// than taking the next orders of a trickle from the first loop.
		block = -1
	}
	msgs, err := w.read(ctx, ">", block)
	return msgs, true, err
}

func (w *Writer) read(ctx context.Context, from string, block time.Duration) ([]redis.XMessage, error) {
	res, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: group, Consumer: w.o.Consumer, Streams: []string{w.keys.Stream(w.part), from},
		Count: int64(w.o.Batch), Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

// handle writes one batch: the good events in one transaction, then acks
// them and marks them confirmed; the rest wait for another delivery or go
// to the dead-letter stream.
func (w *Writer) handle(ctx context.Context, msgs []redis.XMessage) (err error) {
	ctx, span := batchSpan(ctx, w.part, len(msgs))
	defer func() { telemetry.End(span, err) }()
	w.m.batch.Observe(float64(len(msgs)))
	events, transitions, failures := parseBatch(msgs)
	written, recovered, bad, err := w.persistRetrying(ctx, events)
	if errors.Is(err, errGaveUp) {
		return nil // stopping while the database is down: left pending
	}
	if err != nil {
		return err
	}
	w.m.written.Add(float64(len(written)))
	w.afterCommit(ctx, append(written, recovered...))
	if err := w.recordRetrying(ctx, transitions); err != nil {
		return nil // stopping while the database is down: left pending
	}
	w.afterTransition(ctx, transitions)
	if w.faultAfterCommit != nil {
		if err := w.faultAfterCommit(); err != nil {
			return hookError{err} // committed, hook done, not acknowledged
		}
	}
	failures = append(failures, bad...)
	if err := w.confirm(ctx, withoutFailures(events, bad), duplicateIDs(msgs, events, failures)); err != nil {
		return err
	}
	w.reject(ctx, failures)
	return nil
}
