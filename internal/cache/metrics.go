package cache

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	hits, misses  prometheus.Counter
	loads         prometheus.Counter
	errors        *prometheus.CounterVec
	invalidations prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shop_cache_requests_total",
		Help: "Cache reads by result: hit or miss (a Redis error counts as neither).",
	}, []string{"result"})
	m := &metrics{
		hits:   requests.WithLabelValues("hit"),
		misses: requests.WithLabelValues("miss"),
		loads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_cache_loads_total",
			Help: "Loader calls: reads of the system of record on a miss or a Redis error.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_cache_errors_total",
			Help: "Redis errors by cache operation; reads fall back to the loader.",
		}, []string{"op"}),
		invalidations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shop_cache_invalidations_total",
			Help: "Entries dropped by a write (Delete) and tags dropped (InvalidateTag).",
		}),
	}
	if reg != nil {
		reg.MustRegister(requests, m.loads, m.errors, m.invalidations)
	}
	return m
}
