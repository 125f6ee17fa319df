package order

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/metric"
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
		purchases: metric.CounterVec("shop_purchases_total",
			"Purchase and checkout attempts by outcome (accepted, replayed, or the error code).", "outcome"),
		script: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shop_reserve_script_seconds",
			Help:    "Latency of the reserve-and-enqueue script round trip.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .5, 1, 2},
		}),
		transitions: metric.CounterVec("shop_order_transitions_total",
			"Orders paid, cancelled, refunded, or expired when a payment found them late (the sweeper counts its own).", "status"),
		released: metric.CounterVec("shop_order_released_units_total",
			"Units given back to stock by cancelled and refunded orders and those a payment found expired.", "status"),
		payments: metric.CounterVec("shop_payments_total",
			"Payments by outcome: paid, declined, not_payable, incomplete (the provider needs more), refunded (by an admin, or it lost to expiry, a cancel or another payment).", "outcome"),
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
