package visitor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/metric"
)

type metrics struct {
	written prometheus.Counter
	dropped *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		written: metric.Counter("shop_visitor_updates_total",
			"Product views written to the visitor counts."),
		dropped: metric.CounterVec("shop_visitor_updates_dropped_total",
			"Product views not counted, by reason (queue_full, redis_error).", "reason"),
	}
	reg.MustRegister(m.written, m.dropped)
	m.dropped.WithLabelValues("queue_full") // shown from the start, at 0
	m.dropped.WithLabelValues("redis_error")
	return m
}
