package live

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	streams  prometheus.Gauge
	refused  *prometheus.CounterVec
	messages prometheus.Counter
	events   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shop_live_streams",
			Help: "Open live stock event streams on this instance.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_live_streams_refused_total",
			Help: "Live stock streams refused, by reason (per_client, total, shutdown).",
		}, []string{"reason"}),
		messages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_live_messages_total",
			Help: "Stock change messages received from Redis Pub/Sub.",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_live_events_total",
			Help: "Stock events written to streams (after coalescing).",
		}),
	}
	reg.MustRegister(m.streams, m.refused, m.messages, m.events)
	for _, r := range []string{"per_client", "total", "shutdown"} {
		m.refused.WithLabelValues(r) // shown from the start, at 0
	}
	return m
}
