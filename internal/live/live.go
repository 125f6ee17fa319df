// Package live streams each SKU's live stock to browsers as Server-Sent
// Events (GET /api/v1/products/{sku}/events).
//
// The reasoning behind it is in docs/design/live.md.
package live

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/telemetry"
)

// Options tune the hub; zero values take the defaults.
type Options struct {
	// Interval is the shortest time between two stock events of one SKU
	// on a stream (default 250ms).
	Interval time.Duration
	// KeepAlive is the longest silence on a stream: a comment line is sent
	// after it (default 10s; docs/api.md promises at most 15s).
	KeepAlive time.Duration
	// WriteTimeout drops a client whose connection took no data for this
	// long (default 10s).
	WriteTimeout time.Duration
	// Retry is the reconnection delay streams announce (default 2s).
	Retry time.Duration
	// MaxStreams bounds the open streams of this instance (default 10000).
	MaxStreams int
	// MaxPerClient bounds the open streams of one client IP (default 20).
	MaxPerClient int
	// View, when set, is the instance's stock view (inventory.StockView):
	// the subscription keeps it current for the product reads too, every
	// SKU's changes, not only those of watched SKUs. On a cluster (sharded
	// channels) the hub hears only the watched SKUs, so it leaves the view
	// unsubscribed: it keeps nothing and product reads go to Redis.
	View *inventory.StockView
}

func (o *Options) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&o.Interval, 250*time.Millisecond)
	set(&o.KeepAlive, 10*time.Second)
	set(&o.WriteTimeout, 10*time.Second)
	set(&o.Retry, 2*time.Second)
	if o.MaxStreams <= 0 {
		o.MaxStreams = 10000
	}
	if o.MaxPerClient <= 0 {
		o.MaxPerClient = 20
	}
}

// Hub fans stock changes out to the streams of this instance. Make it with
// New, run its subscription with Run.
type Hub struct {
	rdb     redis.UniversalClient
	stock   *inventory.Stock
	o       Options
	log     *slog.Logger
	metrics *metrics

	mu       sync.Mutex
	topics   map[string]*topic // by SKU, only while it has streams
	perIP    map[string]int
	streams  int
	shutdown chan struct{} // closed by Shutdown
	closed   bool
	watched  chan struct{}  // a SKU's first stream opened or its last ended (poke)
	active   sync.WaitGroup // running streams
	// rereads are the bucketed SKUs being read again (buckets.go), and
	// whether a change came during the read.
	rereads map[string]bool

	// resyncRead, for tests, is called between a resync's read of a SKU
	// and its hand-out.
	resyncRead func(sku string)
}

// New returns the hub for stock's changes; its metrics are registered on
// reg.
func New(rdb redis.UniversalClient, stock *inventory.Stock, o Options, log *slog.Logger, reg prometheus.Registerer) *Hub {
	o.defaults()
	return &Hub{
		rdb: rdb, stock: stock, o: o, log: log, metrics: newMetrics(reg),
		topics: map[string]*topic{}, perIP: map[string]int{}, shutdown: make(chan struct{}),
		watched: make(chan struct{}, 1), rereads: map[string]bool{},
	}
}

// Run holds the instance's subscription to every SKU's changes until ctx
// ends, reconnecting as go-redis does; after each (re)subscription it
// reads every watched SKU's state again, since messages published while it
// was away are lost. On a cluster (sharded changes channels) it holds a
// subscription per watched SKU instead (sharded.go).
func (h *Hub) Run(ctx context.Context) {
	if h.stock.ShardedChanges() {
		h.runSharded(ctx)
		return
	}
	h.runPattern(ctx)
}

// runPattern is Run's one pattern subscription to every SKU's ordinary
// changes channel (a single Redis), which feeds the stock view too.
func (h *Hub) runPattern(ctx context.Context) {
	ps := h.rdb.PSubscribe(ctx, h.stock.ChangesPattern())
	defer ps.Close()
	defer h.o.View.Unsubscribed()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-ch:
			switch m := m.(type) {
			case *redis.Message:
				h.receive(m)
			case *redis.Subscription:
				h.log.Debug("live stock: subscribed", "pattern", m.Channel)
				// Changes made while away were missed: the view starts over.
				h.o.View.Subscribed()
				go h.resync(ctx)
			}
		}
	}
}

// receive takes one published change to the SKU's streams, if it has any.
// The message is counted once applied, so that a test that saw the count
// may rely on it.
func (h *Hub) receive(m *redis.Message) {
	defer h.metrics.messages.Inc()
	c, err := h.stock.ParseChange(m.Channel, m.Payload)
	if err != nil {
		h.log.Warn("live stock: message ignored", "err", err)
		return
	}
	h.o.View.Heard(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.Buckets > 1 && h.stock.NoteBuckets(c.SKU, c.Buckets) {
		h.poke() // on a cluster, listen to the round's other buckets too
	}
	if t := h.topics[c.SKU]; t != nil {
		t.heard++
		if c.Buckets > 1 || c.RoomKnown { // a bucket's units, or a new round's (is it a draw?)
			h.rereadRound(c.SKU)
		} else {
			h.update(t, c)
		}
	}
}

// resyncTimeout bounds the reads of watched SKUs after a resubscription.
const resyncTimeout = 5 * time.Second

// resync reads the live state of every watched SKU and hands it out.
func (h *Hub) resync(ctx context.Context) {
	h.mu.Lock()
	skus := make([]string, 0, len(h.topics))
	for sku := range h.topics {
		skus = append(skus, sku)
	}
	h.mu.Unlock()
	h.resyncSKUs(ctx, skus)
}

// resyncSKUs reads the live state of each of skus that is still watched
// and hands it out, unless a published change was heard during the read:
// the subscription is in place by then, so that change is as new as the
// read or newer, and handing out the read would roll the streams back
// (to "1 left" after the last unit sold, say) until the next change. (A
// change published just before the read but delivered only after the
// hand-out still takes the streams back to it: changes carry no version
// to order them by. That window is the client's delivery skew between
// its two connections, not the read's round trip.)
func (h *Hub) resyncSKUs(ctx context.Context, skus []string) {
	if len(skus) == 0 {
		return
	}
	ctx, span := telemetry.Job(ctx, "live stock: read watched SKUs again", attribute.Int("shop.skus", len(skus)))
	defer span.End()
	for _, sku := range skus {
		h.mu.Lock()
		t := h.topics[sku]
		var heard uint64
		if t != nil {
			heard = t.heard
		}
		h.mu.Unlock()
		if t == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, resyncTimeout)
		c, err := h.current(rctx, sku)
		cancel()
		if err != nil {
			h.log.Warn("live stock: state not read again after resubscribing", "sku", sku, "err", err)
			continue
		}
		if h.resyncRead != nil {
			h.resyncRead(sku)
		}
		h.mu.Lock()
		if h.topics[sku] == t && t.heard == heard {
			h.update(t, c)
		}
		h.mu.Unlock()
	}
}

// Shutdown tells every stream to reconnect and ends it, refuses new ones,
// and waits (at most until ctx ends) for the streams to finish writing.
// Call it before the HTTP server's graceful shutdown, which would wait for
// the streams otherwise. It may be called more than once.
func (h *Hub) Shutdown(ctx context.Context) {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.shutdown)
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
