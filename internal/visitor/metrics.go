package visitor

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	written prometheus.Counter
	dropped *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_visitor_updates_total",
			Help: "Product views written to the visitor counts.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_visitor_updates_dropped_total",
			Help: "Product views not counted, by reason (queue_full, redis_error).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.written, m.dropped)
	m.dropped.WithLabelValues("queue_full") // shown from the start, at 0
	m.dropped.WithLabelValues("redis_error")
	return m
}
