package writer

import "github.com/prometheus/client_golang/prometheus"

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
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_order_writer_orders_total", Help: "Orders inserted into PostgreSQL by this writer.",
		}),
		transitions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_order_writer_transitions_total", Help: "Order transitions (paid, cancelled, expired) recorded in PostgreSQL by this writer.",
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_order_writer_dead_letters_total", Help: "Stream entries moved to the dead-letter stream.",
		}),
		unowned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_order_writer_dead_letters_unowned_total",
			Help: "Dead-lettered entries whose order id or buyer could not be read: no order was marked rejected.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_order_writer_errors_total", Help: "Writer errors by kind (transient, permanent, redis).",
		}, []string{"kind"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shop_order_writer_batch_size", Help: "Entries per batch the writer handled.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		streamLen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shop_order_stream_length", Help: "Entries in the order stream.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shop_order_stream_pending", Help: "Entries delivered to writers and not yet acknowledged.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shop_order_writer_lag_seconds", Help: "Age of the oldest entry not yet written (pending or undelivered).",
		}),
	}
	reg.MustRegister(m.written, m.transitions, m.deadLetters, m.unowned, m.errors, m.batch, m.streamLen, m.pending, m.lag)
	return m
}
