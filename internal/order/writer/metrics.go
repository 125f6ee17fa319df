package writer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/metric"
)

type writerMetrics struct {
	written     prometheus.Counter
	transitions prometheus.Counter
	deadLetters prometheus.Counter
	unowned     prometheus.Counter
	errors      *prometheus.CounterVec
	batch       prometheus.Histogram
	streamLen   prometheus.Gauge
	pending     prometheus.Gauge
	lag         prometheus.Gauge
}

func newWriterMetrics(reg prometheus.Registerer) *writerMetrics {
	m := &writerMetrics{
		written:     metric.Counter("shop_order_writer_orders_total", "Orders inserted into PostgreSQL by this writer."),
		transitions: metric.Counter("shop_order_writer_transitions_total", "Order transitions (paid, cancelled, expired) recorded in PostgreSQL by this writer."),
		deadLetters: metric.Counter("shop_order_writer_dead_letters_total", "Stream entries moved to the dead-letter stream."),
		unowned: metric.Counter("shop_order_writer_dead_letters_unowned_total",
			"Dead-lettered entries whose order id or buyer could not be read: no order was marked rejected."),
		errors: metric.CounterVec("shop_order_writer_errors_total", "Writer errors by kind (transient, permanent, redis).", "kind"),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shop_order_writer_batch_size", Help: "Entries per batch the writer handled.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		streamLen: metric.Gauge("shop_order_stream_length", "Entries in the order stream."),
		pending:   metric.Gauge("shop_order_stream_pending", "Entries delivered to writers and not yet acknowledged."),
		lag:       metric.Gauge("shop_order_writer_lag_seconds", "Age of the oldest entry not yet written (pending or undelivered)."),
	}
	reg.MustRegister(m.written, m.transitions, m.deadLetters, m.unowned, m.errors, m.batch, m.streamLen, m.pending, m.lag)
	return m
}
