package bestseller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/metric"
)

type metrics struct {
	orders *prometheus.CounterVec
	errors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		orders: metric.CounterVec("shop_bestseller_updates_total",
			"Orders given to the best-seller boards, by op (count, takeback) and result (applied, skipped: already counted or taken back).", "op", "result"),
		errors: metric.CounterVec("shop_bestseller_update_errors_total",
			"Best-seller batches that failed (Redis did not answer, or a malformed order), by op.", "op"),
	}
	reg.MustRegister(m.orders, m.errors)
	for _, op := range []string{"count", "takeback"} { // shown from the start, at 0
		m.orders.WithLabelValues(op, "applied")
		m.orders.WithLabelValues(op, "skipped")
		m.errors.WithLabelValues(op)
	}
	return m
}

func (m *metrics) updates(op string, r Result, err error) {
	m.orders.WithLabelValues(op, "applied").Add(float64(r.Applied))
	m.orders.WithLabelValues(op, "skipped").Add(float64(r.Skipped))
	if err != nil {
		m.errors.WithLabelValues(op).Inc()
	}
}
