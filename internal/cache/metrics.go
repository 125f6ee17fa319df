package cache

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	hits, misses  prometheus.Counter
	loads         prometheus.Counter
	errors        *prometheus.CounterVec
	invalidations prometheus.Counter
	// The near cache's (near.go).
	nearHits, nearMisses prometheus.Counter
	nearMessages         prometheus.Counter
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
	nearRequests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shop_cache_near_requests_total",
		Help: "Reads of the in-process near cache by result: hit or miss (a miss reads Redis).",
	}, []string{"result"})
	m.nearHits, m.nearMisses = nearRequests.WithLabelValues("hit"), nearRequests.WithLabelValues("miss")
	m.nearMessages = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shop_cache_near_messages_total",
		Help: "Invalidations heard from other processes through Pub/Sub (each drops near entries).",
	})
	if reg != nil {
		reg.MustRegister(requests, m.loads, m.errors, m.invalidations, nearRequests, m.nearMessages)
	}
	return m
}
