package order

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shop-oss/shop/internal/apperr"
)

type placeMetrics struct {
	purchases   *prometheus.CounterVec
	script      prometheus.Histogram
	transitions *prometheus.CounterVec
	released    *prometheus.CounterVec
	payments    *prometheus.CounterVec
}

func newPlaceMetrics(reg prometheus.Registerer) *placeMetrics {
	m := &placeMetrics{
		purchases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_purchases_total",
			Help: "Purchase and checkout attempts by outcome (accepted, replayed, or the error code).",
		}, []string{"outcome"}),
		script: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shop_reserve_script_seconds",
			Help:    "Latency of the reserve-and-enqueue script round trip.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .5, 1, 2},
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_order_transitions_total",
			Help: "Orders paid, cancelled, or expired when a payment found them late (the sweeper counts its own).",
		}, []string{"status"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_order_released_units_total",
			Help: "Units given back to stock by cancelled orders and those a payment found expired.",
		}, []string{"status"}),
		payments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_payments_total", Help: "Payment attempts by outcome (paid, declined, not_payable).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.purchases, m.script, m.transitions, m.released, m.payments)
	return m
}

func (m *placeMetrics) transition(status string, units int64) {
	m.transitions.WithLabelValues(status).Inc()
	if units > 0 {
		m.released.WithLabelValues(status).Add(float64(units))
	}
}

func (m *placeMetrics) pay(outcome string) { m.payments.WithLabelValues(outcome).Inc() }

func (m *placeMetrics) outcome(err error, replayed bool) {
	var e *apperr.Error
	switch {
	case err == nil && replayed:
		m.purchases.WithLabelValues("replayed").Inc()
	case err == nil:
		m.purchases.WithLabelValues("accepted").Inc()
	case errors.As(err, &e):
		m.purchases.WithLabelValues(e.Code).Inc()
	default:
		m.purchases.WithLabelValues("error").Inc()
	}
}

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
