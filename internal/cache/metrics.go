package cache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/metric"
)

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
	requests := metric.CounterVec("shop_cache_requests_total",
		"Cache reads by result: hit or miss (a Redis error counts as neither).", "result")
	m := &metrics{
		hits:   requests.WithLabelValues("hit"),
		misses: requests.WithLabelValues("miss"),
		loads: metric.Counter("shop_cache_loads_total",
			"Loader calls: reads of the system of record on a miss or a Redis error."),
		errors: metric.CounterVec("shop_cache_errors_total",
			"Redis errors by cache operation; reads fall back to the loader.", "op"),
		invalidations: metric.Counter("shop_cache_invalidations_total",
			"Entries dropped by a write (Delete) and tags dropped (InvalidateTag)."),
	}
	nearRequests := metric.CounterVec("shop_cache_near_requests_total",
		"Reads of the in-process near cache by result: hit or miss (a miss reads Redis).", "result")
	m.nearHits, m.nearMisses = nearRequests.WithLabelValues("hit"), nearRequests.WithLabelValues("miss")
	m.nearMessages = metric.Counter("shop_cache_near_messages_total",
		"Invalidations heard from other processes through Pub/Sub (each drops near entries).")
	if reg != nil {
		reg.MustRegister(requests, m.loads, m.errors, m.invalidations, nearRequests, m.nearMessages)
	}
	return m
}
