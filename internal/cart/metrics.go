package cart

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/metric"
	"github.com/shop-oss/shop/internal/order"
)

type metrics struct {
	operations *prometheus.CounterVec
	checkouts  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		operations: metric.CounterVec("shop_cart_operations_total",
			"Cart operations answered successfully, by op (get, add, set, remove, clear).", "op"),
		checkouts: metric.CounterVec("shop_checkouts_total",
			"Cart checkouts by outcome (accepted, replayed, or the error code).", "outcome"),
	}
	reg.MustRegister(m.operations, m.checkouts)
	return m
}

// op counts a cart operation that succeeded; refusals and outages show in
// the HTTP metrics by route and status.
func (m *metrics) op(name string, err error) {
	if err == nil {
		m.operations.WithLabelValues(name).Inc()
	}
}

func (m *metrics) checkout(p order.Placed, err error) {
	m.checkouts.WithLabelValues(outcome(p, err)).Inc()
}

func outcome(p order.Placed, err error) string {
	var e *apperr.Error
	switch {
	case err == nil && p.Replayed:
		return "replayed"
	case err == nil:
		return "accepted"
	case errors.As(err, &e):
		return e.Code
	}
	return "error"
}
