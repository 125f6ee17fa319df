package live

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/metric"
)

type metrics struct {
	streams  prometheus.Gauge
	refused  *prometheus.CounterVec
	messages prometheus.Counter
	events   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: metric.Gauge("shop_live_streams",
			"Open live stock event streams on this instance."),
		refused: metric.CounterVec("shop_live_streams_refused_total",
			"Live stock streams refused, by reason (per_client, total, shutdown).", "reason"),
		messages: metric.Counter("shop_live_messages_total",
			"Stock change messages received from Redis Pub/Sub."),
		events: metric.Counter("shop_live_events_total",
			"Stock events written to streams (after coalescing)."),
	}
	reg.MustRegister(m.streams, m.refused, m.messages, m.events)
	for _, r := range []string{"per_client", "total", "shutdown"} {
		m.refused.WithLabelValues(r) // shown from the start, at 0
	}
	return m
}
